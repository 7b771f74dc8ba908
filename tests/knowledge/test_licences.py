"""The knowledge base by licence: every seed row records its dataset's licence, and `metatune kb`
keeps only the runs of datasets under the licences a deployment may use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from metatune.knowledge import KbFileHeader
from metatune.knowledge.files import write_kb_file
from metatune.knowledge.records import DatasetInfo, under_licences
from metatune.knowledge.store import KnowledgeStore

from .samples import run

LICENCES = {"sst2": "unknown (no licence stated)", "snli": "CC BY-SA 4.0", "news": "CC BY 4.0"}


def licensed_runs() -> list:
    runs = []
    for name, licence in [*LICENCES.items(), ("bare", None)]:
        base = run(f"{name}-1", dataset=name, metric=0.7, baseline=0.5, rank=4)
        dataset = DatasetInfo(name=name, licence=licence)
        runs.append(base.model_copy(update={"dataset": dataset}))
    return runs


def test_runs_are_kept_by_any_licence_named_case_insensitively() -> None:
    runs = licensed_runs()
    kept = {r.dataset.name for r in under_licences(runs, ["cc by"])}
    assert kept == {"snli", "news"}  # CC BY-SA counts as CC BY; no licence recorded: never kept
    assert {r.dataset.name for r in under_licences(runs, ["CC0", "unknown"])} == {"sst2"}


def test_kb_stats_and_portfolio_filter_a_file_by_licence(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    write_kb_file(path, KbFileHeader(), licensed_runs())

    def kb(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "metatune_cli.cli", "kb", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    done = kb("stats", "--kb", str(path), "--licence", "CC BY", "--json")
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["runs"], json.loads(done.stdout)["datasets"]) == (2, 2)
    portfolio = kb("portfolio", "--kb", str(path), "--licence", "unknown", "--json")
    assert portfolio.returncode == 0 and json.loads(portfolio.stdout)["runs"] == 1
    without_file = kb("stats", "--licence", "CC BY")
    assert without_file.returncode == 2 and "--kb" in without_file.stderr


def test_every_v3_seed_row_records_its_dataset_s_licence() -> None:
    seed = Path(__file__).parents[2] / "services/recommender/src/metatune_recommender/data"
    from metatune.knowledge.files import read_kb_file

    runs = read_kb_file(seed / "seed_kb_v3.jsonl").runs
    assert runs and all(r.dataset.licence for r in runs)


@pytest.mark.integration
async def test_import_keeps_only_the_licences_named(store: KnowledgeStore, tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    write_kb_file(path, KbFileHeader(), licensed_runs())
    report = await store.import_file(path, ["CC BY"])
    assert (report.runs, report.added) == (2, 2)
    assert {r.dataset.name for r in await store.runs()} == {"snli", "news"}
