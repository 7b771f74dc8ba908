"""The batched pass (column batches, pyarrow JSON blocks, words as ids) against the row-at-a-time
reference: the same words, counts, skips, errors and profiles."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metatune_profiler.adapters import reader
from metatune_profiler.adapters.files import profile_file, profile_file_by_rows
from metatune_profiler.adapters.reader import Dataset
from metatune_profiler.domain import errors
from metatune_profiler.domain import rows as row_parsing
from metatune_profiler.domain.columns import ColumnRequest, resolve_columns
from metatune_profiler.domain.lexicon import Mattr, TypeCounter, TypeTable, word_ids, words
from metatune_profiler.domain.profile import ProfileOptions
from metatune_profiler.domain.rows import ReadLimits, Row, Skip
from metatune_profiler.domain.sampling import DuplicateCounter, Reservoir
from tests.support.plugin import TEST_DATA

from .conftest import write_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OPTIONS = ProfileOptions(sample_size=64)
# letters, marks, digits, joiners, apostrophes, ideographs and kana (one a mark), Thai, final
# sigma, dotted I, a lone surrogate, emoji, punctuation and spaces
ALPHABET = [
    *"aZ9 '\u2019-\u200c\u200d\n\t\u00c9\u00e9\u0301\u0308\u6f22\u5b57\u30ab\u30ca\u30fc\u3072",
    *"\u302a\u3099\u0e44\u0e17\u0e22\u0e46\u0e31\u0915\u093f\u0627\u064e\U0001f642\u03a3\u03c3",
    *"\u03c2\u0130\u2e80\u30fb\u3007\uff26\uff11\udc80.,\U00020000",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(ALPHABET), max_size=30), max_size=8))
def test_word_ids_are_the_words_of_each_text(texts: list[str]) -> None:
    found = word_ids(texts)
    expected = [words(t) for t in texts]
    flat = [w for ws in expected for w in ws]
    assert found.counts.tolist() == [len(ws) for ws in expected]
    assert [found.word(i) for i in range(found.ids.size)] == flat
    by_word: dict[str, int] = {}
    for word, word_id in zip(flat, found.ids.tolist(), strict=True):
        assert by_word.setdefault(word, word_id) == word_id  # equal words, equal ids
    assert len(set(by_word.values())) == len(by_word)  # different words, different ids
    assert found.crc32s(np.arange(found.ids.size)).tolist() == [
        zlib.crc32(w.encode()) for w in flat
    ]


def _shipped_texts(name: str, rows: int) -> list[str]:
    with gzip.open(TEST_DATA / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for _, line in zip(range(rows), fh, strict=False)]


@pytest.mark.parametrize("max_types", [1_000, 10**6])
def test_type_table_and_mattr_match_their_string_versions(max_types: int) -> None:
    """Counts, sampling level and MATTR from ids equal those from word strings, batch by batch,
    with type sampling (1,000 types kept) and without."""
    texts = _shipped_texts("fortunes_en.jsonl.gz", 3000) + _shipped_texts(
        "afrisenti_amh.jsonl.gz", 1000
    )
    table, counter = TypeTable(max_types), TypeCounter(max_types)
    by_ids, by_strings = Mattr(50), Mattr(50)
    for start in range(0, len(texts), 700):
        batch = texts[start : start + 700]
        found = word_ids(batch)
        table.update(found)
        by_ids.update_ids(found.ids)
        tokens = [w for t in batch for w in words(t)]
        counter.update(tokens)
        by_strings.update(tokens)
    assert (max_types < 10**6) == (counter.level > 0)
    assert table.level == counter.level and table.tokens == counter.tokens
    assert table.vocab_size == counter.vocab_size
    assert table.hapax_ratio() == counter.hapax_ratio()
    assert table.frequency_of_frequencies() == counter.frequency_of_frequencies()
    assert by_ids.value(0.0) == by_strings.value(0.0)


def test_batched_samplers_match_one_at_a_time() -> None:
    texts = [f"row {i % 700}" for i in range(5000)]
    pairs = [f"pair {i % 3}" for i in range(5000)]
    for pair_column in (None, pairs):
        one, many = DuplicateCounter(1_000), DuplicateCounter(1_000)  # compacts several times
        for i, text in enumerate(texts):
            one.add(text, pair_column[i] if pair_column else None)
        for start in range(0, len(texts), 1234):
            many.add_many(
                texts[start : start + 1234],
                pair_column[start : start + 1234] if pair_column else None,
            )
        assert many.level == one.level > 0 and many.rows == one.rows
        assert many.rate() == one.rate()
    single, batched = Reservoir[int](50, 7), Reservoir[int](50, 7)
    for i in range(3000):
        single.add(i)
    for start in range(0, 3000, 999):
        batched.add_many(min(999, 3000 - start), lambda i, start=start: start + i)
    assert batched.items == single.items and batched.seen == single.seen


def _lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def _good(i: int) -> dict[str, object]:
    return {
        "text": f"Sentence {i}: it's {'good' if i % 3 else 'bad'}, n\u00e4mlich",
        "label": i % 2,
    }


# JSON-lines files that pyarrow would read differently from json.loads, or not at all: each is
# read line by line where it matters, so both passes see the same rows, skips and values
ODD_FILES: dict[str, Callable[[Path], Path]] = {
    "clean": lambda p: write_jsonl(p, [_good(i) for i in range(300)]),
    "bom_crlf_no_final_newline": lambda p: _lines(
        p,
        [b"\xef\xbb\xbf"]
        + [json.dumps(_good(i)).encode() + b"\r\n" for i in range(200)]
        + [json.dumps(_good(200)).encode()],
    ),
    "blank_and_bad_lines": lambda p: _lines(
        p,
        [json.dumps(_good(i)).encode() + b"\n" for i in range(200)]
        + [
            b"\n",
            b"   \n",
            b"{not json}\n",
            b"[1, 2]\n",
            b'"text"\n',
            b'{"text": "a"} {"text": "b"}\n',
        ]
        + [b'{"text": "caf\xe9", "label": 1}\n', b'{"text": "x\\ud800y", "label": 1}\n']
        + [json.dumps(_good(i)).encode() + b"\n" for i in range(200, 400)],
    ),
    "odd_values": lambda p: write_jsonl(
        p,
        [_good(i) for i in range(100)]
        + [{"text": "   ", "label": 1}, {"text": None, "label": 1}, {"label": 0}]
        + [{"text": "duplicate keys", "label": 1}]
        + [{"text": 5, "label": 1}, {"text": ["a"], "label": 1}, {"text": "float", "label": 1.5}]
        + [{"text": "bool", "label": True}, {"text": "big", "label": 10**30}]
        + [{"text": "nested", "label": 0, "meta": {"a": [1, {"b": None}]}}]
        + [_good(i) for i in range(100, 300)],
    ),
    "bool_labels": lambda p: write_jsonl(
        p, [{"text": f"t {i}", "label": bool(i % 2)} for i in range(300)]
    ),
    "pairs": lambda p: write_jsonl(
        p,
        [
            {
                "premise": f"a cat {i}",
                "hypothesis": f"a dog {i % 7}",
                "label": "yes" if i % 2 else "no",
            }
            for i in range(300)
        ]
        + [{"premise": "no pair", "hypothesis": "", "label": "no"}],
    ),
}


def _rows_of(dataset: Dataset) -> tuple[list[Row], list[Skip]]:
    rows: list[Row] = []
    skips: list[Skip] = []
    for batch in dataset.batches():
        rows += [batch.row(i) for i in range(len(batch.texts))]
        skips += batch.skips
    return rows, sorted(skips)


@pytest.mark.parametrize("name", sorted(ODD_FILES))
@pytest.mark.parametrize("block_bytes", [256, 1 << 20])
def test_batches_are_the_rows_of_rows(
    name: str, block_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "JSONL_BLOCK_BYTES", block_bytes)  # a line may span blocks
    path = ODD_FILES[name](tmp_path / f"{name}.jsonl")
    raw = path.read_bytes()
    if name == "odd_values":  # a duplicate key cannot come out of json.dumps
        raw = raw.replace(
            b'{"text": "duplicate keys"', b'{"text": "first", "text": "duplicate keys"'
        )
        path.write_bytes(raw)
    limits = ReadLimits(10**9, 200)  # the long lines are over the limit
    one = list(Dataset(path, ColumnRequest(), limits).rows())
    rows, skips = _rows_of(Dataset(path, ColumnRequest(), limits))
    assert rows == [r for r in one if isinstance(r, Row)]
    assert skips == sorted(s for s in one if isinstance(s, Skip))


def test_a_line_longer_than_a_block_is_skipped_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "JSONL_BLOCK_BYTES", 64)
    long = json.dumps({"text": "x" * 5000, "label": 1}).encode() + b"\n"
    good = [json.dumps(_good(i)).encode() + b"\n" for i in range(6)]
    path = _lines(tmp_path / "long.jsonl", [*good[:5], long, good[5], long.rstrip(b"\n")])
    limits = ReadLimits(10**9, 1000)
    one = list(Dataset(path, ColumnRequest(), limits).rows())
    rows, skips = _rows_of(Dataset(path, ColumnRequest(), limits))
    assert skips == [Skip(6, "row_too_large"), Skip(8, "row_too_large")]
    assert rows == [r for r in one if isinstance(r, Row)] and len(rows) == 6


def _same_profile(path: Path, options: ProfileOptions) -> None:
    batched = profile_file(path, options)
    reference = profile_file_by_rows(path, options)
    assert batched.model_dump() == reference.model_dump()


@pytest.mark.parametrize(
    "path",
    [EXAMPLES / "snips_intents_2k.jsonl", *sorted(TEST_DATA.glob("*.jsonl.gz"))],
    ids=lambda p: p.name,
)
def test_shipped_datasets_profile_identically(path: Path) -> None:
    """Every feature (Zipf alpha, MATTR, TTR, token and word lengths...) of the shipped example
    and test datasets is exactly the reference's."""
    _same_profile(path, OPTIONS)


@pytest.mark.parametrize("name", sorted(ODD_FILES))
def test_odd_files_profile_identically(name: str, tmp_path: Path) -> None:
    path = ODD_FILES[name](tmp_path / f"{name}.jsonl")
    _same_profile(path, OPTIONS.model_copy(update={"max_skipped_fraction": 0.5}))


def test_other_formats_profile_identically(tmp_path: Path) -> None:
    records = [_good(i) for i in range(300)]
    csv_path = tmp_path / "d.csv"
    csv_path.write_text(
        "label,text\n" + "".join(f'{r["label"]},"{r["text"]}"\n' for r in records) + "1,\n"
    )
    text_path = tmp_path / "d.txt"
    text_path.write_bytes(b"".join(f"{r['text']}\n".encode() for r in records) + b"bad \xff\n")
    parquet_path = tmp_path / "d.parquet"
    pq.write_table(
        pa.table(
            {"text": [r["text"] for r in records], "label": [str(r["label"]) for r in records]}
        ),
        parquet_path,
    )
    gz_path = tmp_path / "d.jsonl.gz"
    gz_path.write_bytes(gzip.compress(write_jsonl(tmp_path / "plain.jsonl", records).read_bytes()))
    for path in (csv_path, text_path, parquet_path, gz_path):
        _same_profile(path, OPTIONS)


@pytest.mark.parametrize(
    ("lines", "error"),
    [
        (
            [b"{bad\n"] * 10 + [json.dumps(_good(i)).encode() + b"\n" for i in range(20)],
            errors.MalformedRows,
        ),
        (
            [json.dumps({"text": f"t {i}", "label": "one"}).encode() + b"\n" for i in range(20)],
            errors.OneClassLabel,
        ),
        ([b"\n", b"  \n"], errors.EmptyDataset),
        ([json.dumps({"text": "", "label": 1}).encode() + b"\n"] * 5, errors.MissingValues),
    ],
)
def test_unusable_files_fail_alike(
    lines: list[bytes], error: type[Exception], tmp_path: Path
) -> None:
    path = _lines(tmp_path / "bad.jsonl", lines)
    failures = []
    for profile in (profile_file, profile_file_by_rows):
        with pytest.raises(error) as caught:
            profile(path, OPTIONS)
        failures.append((str(caught.value), getattr(caught.value, "row", None)))
    assert failures[0] == failures[1]


def test_a_gzip_bomb_fails_alike(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(
        gzip.compress(b"".join(json.dumps(_good(i)).encode() + b"\n" for i in range(5000)))
    )
    options = OPTIONS.model_copy(update={"max_file_bytes": 100_000})
    for profile in (profile_file, profile_file_by_rows):
        with pytest.raises(errors.FileTooLarge):
            profile(path, options)


def test_plain_blocks_are_parsed_by_pyarrow(tmp_path: Path) -> None:
    """A clean block (string text, integer or boolean labels) takes the columnar path."""
    records = [{"text": f"t {i}", "label": i % 2, "flag": i % 3 == 0} for i in range(50)]
    block = write_jsonl(tmp_path / "d.jsonl", records).read_bytes()
    for label in ("label", "flag"):
        columns = resolve_columns(["text", label], ColumnRequest(label=label))
        batch = row_parsing._arrow_batch(block, 1, 1000, columns)
        assert batch is not None and batch.numbers == list(range(1, 51))
        assert batch.labels == [str(r[label]).lower() for r in records]
    text_only = resolve_columns(["text"], ColumnRequest())
    assert row_parsing._arrow_batch(b"\n" + block, 1, 1000, text_only) is None  # a blank line


def test_lone_surrogates_are_tokenised_as_replacement_characters(tmp_path: Path) -> None:
    """JSON may escape a lone surrogate ("\\ud800"); every sampled row holding one is still
    tokenised (as U+FFFD, one token where the word was) instead of failing the whole batch."""
    lines = [
        b'{"text": "x\\ud800y number %d", "text_pair": "\\udfff", "label": %d}\n' % (i, i % 2)
        for i in range(40)
    ]
    result = profile_file(_lines(tmp_path / "surrogates.jsonl", lines), OPTIONS)
    clean = profile_file(
        _lines(
            tmp_path / "clean.jsonl",
            [
                line.replace(b"\\ud800", b"\\ufffd").replace(b"\\udfff", b"\\ufffd")
                for line in lines
            ],
        ),
        OPTIONS,
    )
    assert result.features.n_examples == 40
    assert result.features.tokens_mean == clean.features.tokens_mean > 0
