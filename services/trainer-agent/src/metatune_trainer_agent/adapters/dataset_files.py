"""Read a dataset file into rows: JSON lines, CSV, Parquet and plain text (one example per line),
each optionally gzip-compressed; :func:`~..domain.dataset.examples_from_rows` keeps the usable ones.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from metatune.contracts import DatasetFormat, TaskType

from ..domain.dataset import Examples, examples_from_rows
from ..domain.errors import TrainingDatasetNotFound


def detect_format(path: Path) -> DatasetFormat:
    name = path.name.lower().removesuffix(".gz")
    for suffix, fmt in (
        (".jsonl", DatasetFormat.jsonl),
        (".json", DatasetFormat.jsonl),
        (".ndjson", DatasetFormat.jsonl),
        (".csv", DatasetFormat.csv),
        (".tsv", DatasetFormat.csv),
        (".parquet", DatasetFormat.parquet),
        (".txt", DatasetFormat.text),
    ):
        if name.endswith(suffix):
            return fmt
    with path.open("rb") as fh:
        if fh.read(4) == b"PAR1":
            return DatasetFormat.parquet
    with _open_text(path) as fh:
        head = fh.read(1)
    return DatasetFormat.jsonl if head == "{" else DatasetFormat.text


def load_examples(
    path: Path,
    task: TaskType,
    *,
    fmt: DatasetFormat | None = None,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
) -> Examples:
    """Read ``path`` and keep the rows the task can use (a text, and a label for classification)."""
    if not path.is_file():
        raise TrainingDatasetNotFound(f"dataset {path} does not exist")
    try:
        rows = list(_read_rows(path, fmt or detect_format(path)))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error, ValueError) as exc:
        raise TrainingDatasetNotFound(f"dataset {path} cannot be read: {exc}") from exc
    return examples_from_rows(
        rows,
        task,
        str(path),
        text_column=text_column,
        text_pair_column=text_pair_column,
        label_column=label_column,
    )


def _open_text(path: Path) -> IO[str]:
    raw = path.open("rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8", newline="")
    raw.seek(0)
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")


def _read_rows(path: Path, fmt: DatasetFormat) -> Iterator[dict[str, Any]]:
    if fmt == DatasetFormat.parquet:
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
        return
    with _open_text(path) as fh:
        if fmt == DatasetFormat.jsonl:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise ValueError(f"a JSON line is a {type(row).__name__}, not an object")
                    yield row
        elif fmt == DatasetFormat.csv:
            dialect = (
                "excel-tab" if path.name.lower().removesuffix(".gz").endswith(".tsv") else "excel"
            )
            yield from csv.DictReader(fh, dialect=dialect)
        else:
            for line in fh:
                if line.strip():
                    yield {"text": line.rstrip("\n")}
