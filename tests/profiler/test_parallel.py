"""The block-parallel pass (blocks counted apart, merged in order) against the sequential pass and
the row-at-a-time reference: the same profile, field by field, across block boundaries."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from metatune_profiler.adapters import reader
from metatune_profiler.adapters.block_pool import ProcessBlockMap, block_map
from metatune_profiler.adapters.files import profile_file, profile_file_by_rows
from metatune_profiler.domain.profile import ProfileOptions

from .conftest import write_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHIPPED = [EXAMPLES / "snips_intents_2k.jsonl", *sorted((EXAMPLES / "demo").glob("*.jsonl"))]
OPTIONS = ProfileOptions(sample_size=64, mattr_window=50)


def in_process(fn: Callable[[object], object], items: Iterable[object]) -> Iterator[object]:
    """The block map without processes: the merge alone."""
    return map(fn, items)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "JSONL_BLOCK_BYTES", 2048)  # many blocks in a small file


def _edge_cases(tmp_path: Path) -> Path:
    """Rows whose words cross many 2 KiB blocks, with bad rows, CRLF, a BOM, a huge row and a
    MATTR window (50 words) far longer than a block's words."""
    lines: list[bytes] = [
        b"\xef\xbb\xbf" + json.dumps({"text": "bom first", "label": "a"}).encode()
    ]
    for i in range(600):
        text = " ".join(f"w{(i * 7 + j) % 97}" for j in range(i % 13)) or "x"
        line = json.dumps({"text": f"{text} caf\u00e9 \u6f22\u5b57", "label": "ab"[i % 2]})
        if i % 50 == 3:
            line = "{not json"
        if i % 70 == 5:
            line = json.dumps({"text": "", "label": "a"})
        if i % 90 == 7:
            line = ""
        end = b"\r\n" if i % 3 == 0 else b"\n"
        lines.append(line.encode() + end)
    lines.insert(300, json.dumps({"text": "y" * 5000, "label": "a"}).encode() + b"\n")
    path = tmp_path / "edges.jsonl"
    path.write_bytes(b"\n".join(lines[:1]) + b"\n" + b"".join(lines[1:]))
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_examples_equal_the_reference(path: Path, small_blocks: None) -> None:
    parallel = profile_file(path, OPTIONS, map_blocks=in_process)
    assert parallel == profile_file_by_rows(path, OPTIONS)
    assert parallel == profile_file(path, OPTIONS)


def test_block_boundary_edge_cases_equal_the_reference(tmp_path: Path, small_blocks: None) -> None:
    path = _edge_cases(tmp_path)
    options = OPTIONS.model_copy(update={"max_row_bytes": 4096, "max_skipped_fraction": 0.5})
    parallel = profile_file(path, options, map_blocks=in_process)
    assert parallel.rows_skipped > 0 and {"malformed_row", "missing_value", "row_too_large"} <= set(
        parallel.skipped
    )
    assert parallel.features.mattr_window == 50 and parallel.features.extra["word_tokens"] > 500
    assert parallel == profile_file_by_rows(path, options)
    assert parallel == profile_file(path, options)


def test_the_type_cap_and_fingerprint_cap_equal_the_reference(
    tmp_path: Path, small_blocks: None
) -> None:
    path = write_jsonl(
        tmp_path / "many.jsonl",
        ({"text": f"t{i} u{i * 3} v{i % 7}", "label": str(i % 3)} for i in range(3000)),
    )
    options = OPTIONS.model_copy(update={"max_types": 1000, "max_fingerprints": 1000})
    parallel = profile_file(path, options, map_blocks=in_process)
    assert parallel.features.extra["type_sample_rate"] < 1.0
    assert parallel == profile_file_by_rows(path, options)


def test_pairs_and_window_one_equal_the_reference(tmp_path: Path, small_blocks: None) -> None:
    path = write_jsonl(
        tmp_path / "pairs.jsonl",
        (
            {"premise": f"a{i} b{i % 5}", "hypothesis": f"c{i % 11} d", "label": str(i % 2)}
            for i in range(400)
        ),
    )
    for window in (1, 7):
        options = OPTIONS.model_copy(update={"mattr_window": window})
        parallel = profile_file(path, options, map_blocks=in_process)
        assert parallel.features.is_pair
        assert parallel == profile_file_by_rows(path, options)


def test_worker_processes_give_the_same_profile(tmp_path: Path, small_blocks: None) -> None:
    path = _edge_cases(tmp_path)
    options = OPTIONS.model_copy(update={"max_row_bytes": 4096, "max_skipped_fraction": 0.5})
    seen: list[int] = []
    parallel = profile_file(path, options, seen.append, map_blocks=ProcessBlockMap(2))
    assert parallel == profile_file(path, options)
    assert parallel == profile_file(path, options, map_blocks=ProcessBlockMap(1))


def test_block_map_counts_in_process_for_one_worker_or_a_small_file(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "small.jsonl", [{"text": "a", "label": "b"}])
    assert block_map(1, path) is None
    assert block_map(4, path) is None  # under PARALLEL_MIN_BYTES
    assert block_map(4, tmp_path / "missing.jsonl") is None
    with pytest.raises(ValueError):
        ProcessBlockMap(0)
