"""Formats, column detection, and a typed error for each kind of bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metatune.contracts import DatasetFormat, TaskType
from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain import errors
from metatune_profiler.domain.columns import ColumnRequest
from metatune_profiler.domain.profile import ProfileOptions

from .conftest import write_jsonl

LABELLED = [
    {
        "text": f"sentence number {i} is {'good' if i % 2 else 'bad'}",
        "label": "pos" if i % 2 else "neg",
    }
    for i in range(40)
]
OPTIONS = ProfileOptions(sample_size=16)


def profile(path: Path, **changes) -> object:
    return profile_file(path, OPTIONS.model_copy(update=changes))


def test_the_same_rows_give_the_same_features_in_every_format(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "d.jsonl", LABELLED)
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("label,text\n" + "".join(f'{r["label"]},"{r["text"]}"\n' for r in LABELLED))
    parquet = tmp_path / "d.parquet"
    pq.write_table(
        pa.table({"text": [r["text"] for r in LABELLED], "label": [r["label"] for r in LABELLED]}),
        parquet,
        row_group_size=7,
    )
    gz = tmp_path / "d.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl.read_bytes()))
    results = [profile(p) for p in (jsonl, csv_path, parquet, gz)]
    assert [r.format for r in results] == [
        DatasetFormat.jsonl,
        DatasetFormat.csv,
        DatasetFormat.parquet,
        DatasetFormat.jsonl,
    ]
    assert all(r.features == results[0].features for r in results)
    assert results[0].features.n_classes == 2 and results[0].features.n_examples == 40


def test_format_is_detected_from_content_without_extension(tmp_path: Path) -> None:
    path = tmp_path / "upload"
    path.write_bytes(
        gzip.compress(
            b"".join(f'{{"sentence": "s {i}", "class": "{i % 3}"}}\n'.encode() for i in range(30))
        )
    )
    result = profile(path)
    assert result.format == DatasetFormat.jsonl
    assert (result.columns.text, result.columns.label) == ("sentence", "class")
    pq.write_table(pa.table({"review": ["x y", "z"], "target": [0, 1]}), path)
    assert profile(path).format == DatasetFormat.parquet


def test_csv_quoted_newlines_tsv_and_named_columns(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text('id,body,y\n1,"line one\nline two",a\n2,"plain, with comma",b\n3,third,a\n')
    result = profile(path, columns=ColumnRequest(label="y"))
    assert result.features.n_examples == 3 and result.columns.text == "body"
    assert result.features.words_max == 4
    tsv = tmp_path / "d.tsv"
    tsv.write_text("sentence1\tsentence2\tlabel\na b\tc\tx\nd\te f\ty\n")
    assert profile(tsv).features.is_pair


def test_text_file_is_a_causal_lm_corpus(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("first line of text\n\nsecond line\n")
    result = profile(path)
    assert result.features.n_examples == 2 and result.features.n_classes == 0
    with pytest.raises(errors.NoLabelColumn):
        profile(path, columns=ColumnRequest(task=TaskType.classification))


def test_causal_lm_task_ignores_labels(tmp_path: Path) -> None:
    result = profile(
        write_jsonl(tmp_path / "d.jsonl", LABELLED), columns=ColumnRequest(task=TaskType.causal_lm)
    )
    assert result.columns.label is None and result.features.n_classes == 0


# ------------------------------------------------------------------------------ bad input


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        "".join(f'{{"text": "caf\u00e9 cr\u00e8me {i}"}}\n' for i in range(10)).encode("latin-1")
    )
    with pytest.raises(errors.NotUtf8) as caught:
        profile(path)
    assert caught.value.row == 1 and caught.value.code == "not_utf8"
    csv_path = tmp_path / "latin1.csv"
    csv_path.write_bytes(
        b"text\n" + "".join(f"d\u00e9j\u00e0 {i}\n" for i in range(10)).encode("latin-1")
    )
    with pytest.raises(errors.NotUtf8) as caught:
        profile(csv_path)
    assert caught.value.row == 2  # line 1 is the header


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(errors.EmptyDataset):
        profile(path)


def test_no_text_column(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"foo": "a", "label": "x"}, {"foo": "b", "label": "y"}]
    )
    with pytest.raises(errors.NoTextColumn, match="foo"):
        profile(path)
    with pytest.raises(errors.NoTextColumn, match="'body'"):
        profile(path, columns=ColumnRequest(text="body"))
    with pytest.raises(errors.NoPairColumn):
        profile(path, columns=ColumnRequest(text="foo", task=TaskType.pair_classification))


def test_one_class_label(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"text": f"t {i}", "label": "same"} for i in range(20)]
    )
    with pytest.raises(errors.OneClassLabel, match="same"):
        profile(path)


def test_row_too_large(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "big.jsonl", [{"text": "word " * 500, "label": "a"}])
    with pytest.raises(errors.RowTooLarge) as caught:
        profile(path, max_row_bytes=1000)
    assert caught.value.row == 1


def test_file_too_large_and_decompression_bomb(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", LABELLED)
    with pytest.raises(errors.FileTooLarge):
        profile(path, max_file_bytes=100)
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b'{"text": "' + b"a" * 2_000_000 + b'"}\n'))
    assert bomb.stat().st_size < 10_000
    with pytest.raises(errors.FileTooLarge):
        profile(bomb, max_file_bytes=1_000_000)


def test_unknown_base_model(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", LABELLED)
    with pytest.raises(errors.ProfileUnknownBaseModel):
        profile(path, base_model="no-such-model")
    (tmp_path / "model").mkdir()
    with pytest.raises(errors.ProfileUnknownBaseModel):
        profile(path, base_model=str(tmp_path / "model"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(errors.ProfileDatasetNotFound):
        profile(tmp_path / "nothing.jsonl")


def test_corrupt_parquet(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(errors.UnreadableDataset):
        profile(path)


def test_partially_bad_file_profiles_the_good_rows(tmp_path: Path) -> None:
    good = [f'{{"text": "good row {i}", "label": "{i % 2}"}}\n'.encode() for i in range(60)]
    lines = [
        *good[:10],
        b'{"text": "broken json\n',
        '{"text": "caf\u00e9", "label": "1"}\n'.encode("latin-1"),
        b'{"label": "0"}\n',
        b'{"text": "' + b"x" * 300 + b'", "label": "1"}\n',
        *good[10:],
    ]
    path = tmp_path / "partial.jsonl"
    path.write_bytes(b"".join(lines))
    result = profile(path, max_row_bytes=200)
    assert result.features.n_examples == 60
    assert result.rows_read == 64 and result.rows_skipped == 4
    assert result.skip_reasons == {
        "malformed_row": 1,
        "not_utf8": 1,
        "missing_value": 1,
        "row_too_large": 1,
    }
    assert result.skipped["not_utf8"].first_rows == [12]
    assert result.skipped["row_too_large"].first_rows == [14]
    with pytest.raises(errors.ProfileError) as caught:
        profile(path, max_row_bytes=200, max_skipped_fraction=0.05)
    assert caught.value.row is not None and "4 of 64 rows" in caught.value.message
