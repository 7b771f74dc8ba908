"""`metatune kb probe` gives a knowledge-base file built before the label probe its datasets'
probes, as the profiler measures them for a study, and changes nothing else."""

from __future__ import annotations

import json
import os
from pathlib import Path

from metatune.knowledge import KbFileHeader
from metatune.knowledge.files import read_kb_file, write_kb_file
from metatune.models import EMBEDDED_MODEL
from metatune_kb.adapters.build import profile
from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain.columns import ColumnRequest
from metatune_profiler.domain.profile import ProfileOptions
from tests.support.cli import run as cli

from .samples import run

TOPICS = {
    "sport": ["goal", "match", "striker", "league", "coach", "referee"],
    "money": ["bank", "loan", "interest", "market", "shares", "budget"],
}


def _dataset(path: Path) -> Path:
    rows = []
    for i in range(400):
        label = sorted(TOPICS)[i % 2]
        words = TOPICS[label]
        rows.append({"text": f"{words[i % 6]} news {words[(i * 5) % 6]} today", "label": label})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_kb_probe_fills_each_datasets_probe_once_and_leaves_the_rest_of_each_run(
    tmp_path: Path,
) -> None:
    data = tmp_path / "text"
    data.mkdir()
    source = _dataset(data / "topics.jsonl")
    kb = tmp_path / "kb.jsonl"
    runs = [run(f"r{i}", dataset="topics", rank=4 * (i + 1)) for i in range(3)]
    write_kb_file(kb, KbFileHeader(provenance={"machine": "test"}), runs)
    env = {**os.environ, "METATUNE_DATA_DIR": str(tmp_path / "home")}

    done = cli(["kb", "probe", str(kb), "--data", str(data), "--json"], env)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)[str(kb)]
    expected = profile_file(
        source, ProfileOptions(columns=ColumnRequest(text="text", label="label", task=None))
    ).features.probe_accuracy
    assert expected is not None and measured == {"topics": expected}
    filled = read_kb_file(kb)
    assert filled.header.provenance == {"machine": "test"}
    for before, after in zip(runs, filled.runs, strict=True):
        assert after.dataset.features is not None
        assert after.dataset.features.probe_accuracy == expected
        unprobed = after.dataset.features.model_copy(update={"probe_accuracy": None})
        assert (
            after.model_copy(
                update={"dataset": after.dataset.model_copy(update={"features": unprobed})}
            )
            == before
        )

    again = cli(["kb", "probe", str(kb), "--data", str(data), "--json"], env)
    assert again.returncode == 0 and json.loads(again.stdout) == {str(kb): {}}


def test_kb_probe_names_a_dataset_it_cannot_find_in_one_line(tmp_path: Path) -> None:
    kb = tmp_path / "kb.jsonl"
    write_kb_file(kb, KbFileHeader(), [run("r0", dataset="absent")])
    before = kb.read_bytes()
    env = {**os.environ, "METATUNE_DATA_DIR": str(tmp_path / "home")}
    done = cli(["kb", "probe", str(kb), "--data", str(tmp_path)], env)
    assert done.returncode == 2
    assert "absent" in done.stderr and "absent.jsonl" in done.stderr
    assert kb.read_bytes() == before  # nothing half-written


def test_a_builds_profile_cached_before_the_probe_is_made_again(tmp_path: Path) -> None:
    source = _dataset(tmp_path / "topics.jsonl")
    cache = tmp_path / "topics.profile.json"
    fresh = profile(source, cache, EMBEDDED_MODEL, pair=False)
    assert fresh.probe_accuracy is not None
    cache.write_text(fresh.model_copy(update={"probe_accuracy": None}).model_dump_json())
    assert profile(source, cache, EMBEDDED_MODEL, pair=False) == fresh  # measured again
    source.unlink()
    assert profile(source, cache, EMBEDDED_MODEL, pair=False) == fresh  # the cache answers now
