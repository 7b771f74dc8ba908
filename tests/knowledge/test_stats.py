"""`kb stats` per dataset: the share of runs beating the majority baseline and the noise between seeds
against the spread between configurations, the same from a file as from the real PostgreSQL."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from metatune.knowledge import KbFileHeader, KbRun
from metatune.knowledge.files import write_kb_file
from metatune.knowledge.stats import file_stats
from metatune.knowledge.store import KnowledgeStore
from tests.support.cli import fits
from tests.support.cli import run as cli

from .samples import run


def seeded(base: KbRun, seed: int) -> KbRun:
    """``base`` with another seed: the same configuration, repeated."""
    return base.model_copy(update={"seed": seed, "config": {**base.config, "seed": seed}})


def runs() -> list[KbRun]:
    return [
        run("s1", dataset="sst2", metric=0.80, baseline=0.55, rank=4),
        seeded(run("s2", dataset="sst2", metric=0.82, baseline=0.55, rank=4), 14),
        run("s3", dataset="sst2", metric=0.60, baseline=0.55, rank=8),
        run("s4", dataset="sst2", metric=0.55, baseline=0.55, rank=16),  # the baseline: no gain
        run("r1", dataset="rte", metric=0.50, baseline=0.52, rank=4),
        seeded(run("r2", dataset="rte", metric=0.70, baseline=0.52, rank=4), 14),
        run("r3", dataset="rte", metric=0.60, baseline=0.52, rank=8),
        run("n1", dataset="nli", metric=0.40, baseline=0.40, rank=4),  # nothing learns
        run("p1", dataset="deberta-base_mnli", metric=0.87, baseline=None, source="public:x"),
    ]


def test_per_dataset_noise_against_spread_and_share_beating_the_baseline() -> None:
    stats = file_stats(runs())
    by_name = {q.dataset: q for q in stats.per_dataset}
    assert set(by_name) == {"sst2", "rte", "nli"}  # the public table has no baseline
    sst2, rte, nli = by_name["sst2"], by_name["rte"], by_name["nli"]
    assert (sst2.runs, sst2.configs, sst2.repeated_configs) == (4, 3, 1)  # seed 14 repeats rank 4
    assert sst2.beats_baseline_share == pytest.approx(3 / 4)
    assert sst2.config_spread == pytest.approx(statistics.stdev([0.81, 0.60, 0.55]))
    assert sst2.seed_std == pytest.approx(statistics.stdev([0.80, 0.82]))
    assert sst2.noise_within_spread is True
    # rte: both configurations average 0.60, and the seeds differ by 0.20: noise, no spread
    assert rte.config_spread == pytest.approx(0.0, abs=1e-12)
    assert rte.seed_std == pytest.approx(statistics.stdev([0.50, 0.70]))
    assert rte.noise_within_spread is False and rte.beats_baseline_share == pytest.approx(2 / 3)
    assert nli.noise_within_spread is None and nli.best_margin == 0.0
    assert (stats.datasets_noise_within_spread, stats.datasets_noise_measured) == (1, 2)
    assert stats.min_beats_baseline_share == pytest.approx(2 / 3)  # nli: no run beats, not counted
    assert stats.repeated_configs == 2


@pytest.mark.integration
async def test_the_store_measures_what_the_file_does(store: KnowledgeStore) -> None:
    await store.add_runs(runs())
    from_store = await store.stats()
    assert (
        from_store.per_dataset == file_stats(runs()).per_dataset
    )  # repeats found by the store too


def kb_stats(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metatune_cli.cli", "kb", "stats", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_stats_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    write_kb_file(path, KbFileHeader(), runs())
    done = kb_stats("--kb", str(path), "--json")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert [q["dataset"] for q in stats["per_dataset"]] == ["nli", "rte", "sst2"]
    assert stats["datasets_noise_within_spread"] == 1
    table = kb_stats("--kb", str(path))
    assert table.returncode == 0 and "seed noise within a third of the spread on 1 of 2" in (
        table.stdout
    )
    missing = kb_stats("--kb", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2 and "absent.jsonl" in missing.stderr


def test_kb_tables_fit_80_columns_and_wide_gives_every_column(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    write_kb_file(path, KbFileHeader(), runs())
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe: 80 columns
    stats = cli(["kb", "stats", "--kb", str(path)], env)
    assert stats.returncode == 0, stats.stderr
    fits(stats.stdout)
    assert "quiet" in stats.stdout and "seed std <= spread/3" not in stats.stdout
    portfolio = cli(["kb", "portfolio", "--kb", str(path), "--k", "2"], env)
    assert portfolio.returncode == 0, portfolio.stderr
    fits(portfolio.stdout)
    assert "rank=4" in portfolio.stdout and "=None" not in portfolio.stdout  # what it sets

    wide_stats = cli(["kb", "stats", "--kb", str(path), "--wide"], env)
    assert wide_stats.returncode == 0 and "seed std <= spread/3" in wide_stats.stdout
    wide = cli(["kb", "portfolio", "--kb", str(path), "--k", "2", "--wide"], env)
    assert wide.returncode == 0 and "target_modules=None" in wide.stdout
