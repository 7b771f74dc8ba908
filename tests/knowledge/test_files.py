"""Knowledge-base files: round trip, gzip, torn last line, and the typed errors for bad files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from metatune.knowledge import KB_SCHEMA_VERSION, KbFileHeader
from metatune.knowledge.errors import KbFileError, KbSchemaMismatch
from metatune.knowledge.files import read_kb_file, repair_kb_file, write_kb_file
from metatune_recommender.adapters.seeds import seed_paths

from .samples import run


@pytest.mark.parametrize("name", ["kb.jsonl", "kb.jsonl.gz"])
def test_write_then_read_gives_the_same_runs(tmp_path: Path, name: str) -> None:
    runs = [run("a"), run("b", dataset="rte", metric=0.6)]
    header = KbFileHeader(provenance={"machine": "test"})
    assert write_kb_file(tmp_path / name, header, runs) == 2
    kb = read_kb_file(tmp_path / name)
    assert kb.header == header and kb.runs == runs and not kb.torn


def test_a_torn_last_line_is_dropped_and_repair_cuts_it(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    write_kb_file(path, KbFileHeader(), [run("a"), run("b")])
    whole = path.read_bytes()
    path.write_bytes(whole + run("c").model_dump_json().encode()[:40])  # a writer killed mid-line
    kb = read_kb_file(path)
    assert kb.torn and [r.run_id for r in kb.runs] == ["a", "b"]
    assert path.read_bytes() != whole  # reading never writes
    repaired = repair_kb_file(path)
    assert [r.run_id for r in repaired.runs] == ["a", "b"] and path.read_bytes() == whole


def test_a_file_of_another_schema_version_names_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    header = {
        "kind": "metatune-knowledge-base",
        "schema_version": KB_SCHEMA_VERSION + 1,
        "provenance": {},
    }
    path.write_text(json.dumps(header) + "\n" + run("a").model_dump_json() + "\n")
    with pytest.raises(KbSchemaMismatch) as caught:
        read_kb_file(path)
    assert (
        caught.value.found == KB_SCHEMA_VERSION + 1 and caught.value.expected == KB_SCHEMA_VERSION
    )
    message = str(caught.value)
    assert (
        f"version {KB_SCHEMA_VERSION + 1}" in message and f"version {KB_SCHEMA_VERSION}" in message
    )


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty"),
        (b"text,label\nhello,1\n", "first line is not JSON"),
        (b'{"text": "hello", "label": 1}\n', "no header line"),
        (gzip.compress(b'{"kind": "something-else"}\n', mtime=0), "no header line"),
    ],
    ids=["empty", "csv", "jsonl-without-header", "gzip-without-header"],
)
def test_a_file_that_is_not_a_knowledge_base_is_refused(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(content)
    with pytest.raises(KbFileError, match=reason) as caught:
        read_kb_file(path)
    assert not isinstance(caught.value, KbSchemaMismatch)


def test_a_line_that_is_not_a_run_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    write_kb_file(path, KbFileHeader(), [run("a")])
    with path.open("a") as handle:
        handle.write('{"run_id": "x"}\n')
    with pytest.raises(KbFileError, match="line 3 is not a run"):
        read_kb_file(path)


def test_every_shipped_seed_row_has_its_budget_in_epochs_steps_and_examples() -> None:
    seeds = seed_paths()
    assert len(seeds) == 4
    for path in seeds:
        for kb_run in read_kb_file(path).runs:  # files that predate the field included
            budget, config = kb_run.budget, kb_run.config
            assert budget is not None and budget.steps == kb_run.steps
            assert budget.examples_seen == kb_run.steps * config["batch_size"]
            assert budget.train_rows == kb_run.dataset.n_train
            if config.get("max_steps") is None and kb_run.status == "completed":
                assert budget.epochs == pytest.approx(config["epochs"], rel=0.02)
    written = read_kb_file(seeds[1]).runs[0]
    assert type(written).model_validate_json(written.model_dump_json()).budget == written.budget
