"""The rows a dataset reader yields, and the parsing of JSON lines, on bytes already read.

A row that cannot be used becomes a :class:`Skip` with its reason code and 1-based row number
instead of stopping the read; :class:`RowBatch` holds consecutive rows as columns. A block of
whole JSON lines is parsed by pyarrow's JSON reader (C++, on the bytes in memory) when it is
plain: every line a JSON object starting with ``{`` and within ``max_row_bytes``, valid UTF-8, one
record per line, and the wanted columns strings (a label may also be integers or booleans, which
read as ``str()`` does). Any other block (a bad line, a blank line, mixed types, duplicate
keys...) is read line by line, so skips, row numbers and values are the same either way. The
files themselves are opened by :mod:`metatune_profiler.adapters.reader`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from .columns import ColumnMap
from .errors import MalformedRows, MissingValues, NotUtf8, RowTooLarge


@dataclass(frozen=True)
class ReadLimits:
    max_file_bytes: int
    max_row_bytes: int


class Row(NamedTuple):
    row: int
    text: str
    text_pair: str | None
    label: str | None


class Skip(NamedTuple):
    row: int
    reason: (
        str  # an error code from .errors (not_utf8, row_too_large, malformed_row, missing_value)
    )


@dataclass
class RowBatch:
    """Consecutive rows as columns (``pairs`` / ``labels`` None when the columns are not used),
    and the skips met among them."""

    numbers: list[int]
    texts: list[str]
    pairs: list[str] | None
    labels: list[str] | None
    skips: list[Skip]

    def row(self, i: int) -> Row:
        return Row(
            self.numbers[i],
            self.texts[i],
            self.pairs[i] if self.pairs is not None else None,
            self.labels[i] if self.labels is not None else None,
        )

    @classmethod
    def of(cls, items: list[Row | Skip], columns: ColumnMap) -> RowBatch:
        rows = [r for r in items if isinstance(r, Row)]
        return cls(
            [r.row for r in rows],
            [r.text for r in rows],
            [r.text_pair or "" for r in rows] if columns.text_pair else None,
            [r.label or "" for r in rows] if columns.label else None,
            [s for s in items if isinstance(s, Skip)],
        )


def split_lines(fh: BinaryIO, max_row_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line without its terminator), or None for a line over the limit (skipped unread)."""
    number = 0
    while True:
        line = fh.readline(max_row_bytes + 1)
        if not line:
            return
        number += 1
        if not line.endswith(b"\n") and len(line) > max_row_bytes:
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        yield number, line.rstrip(b"\r\n")


def cell(value: object) -> str | None:
    """A usable text or label value, or None for a missing one."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise TypeError(type(value).__name__)


def to_row(number: int, record: dict[str, Any], columns: ColumnMap) -> Row | Skip:
    try:
        text = cell(record.get(columns.text))
        pair = cell(record.get(columns.text_pair)) if columns.text_pair else None
        label = cell(record.get(columns.label)) if columns.label else None
    except TypeError:
        return Skip(number, MalformedRows.code)
    if text is None or (columns.text_pair and pair is None) or (columns.label and label is None):
        return Skip(number, MissingValues.code)
    return Row(number, text, pair, label)


def jsonl_lines(
    fh: BinaryIO, max_row_bytes: int, offset: int = 0
) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line + offset, object) or (line + offset, skip reason) for each non-blank line."""
    for number, line in split_lines(fh, max_row_bytes):
        number += offset
        if line is None:
            yield number, RowTooLarge.code
            continue
        try:
            decoded = line.decode("utf-8")
        except UnicodeDecodeError:
            yield number, NotUtf8.code
            continue
        if not decoded.strip():
            continue
        try:
            record = json.loads(decoded)
        except ValueError:
            yield number, MalformedRows.code
            continue
        yield (number, record) if isinstance(record, dict) else (number, MalformedRows.code)


_OPEN_BRACE = ord("{")
_NEWLINE = ord("\n")


def parse_jsonl_block(
    first_line: int, block: bytes | Skip, max_row_bytes: int, columns: ColumnMap
) -> RowBatch:
    """The rows of one block of :meth:`Dataset.jsonl_blocks`: by pyarrow when the block is plain,
    else line by line (the same rows, skips and values either way)."""
    if isinstance(block, Skip):
        return RowBatch([], [], None, None, [block])
    batch = _arrow_batch(block, first_line, max_row_bytes, columns)
    if batch is None:
        items: list[Row | Skip] = []
        for number, record in jsonl_lines(io.BytesIO(block), max_row_bytes, first_line - 1):
            items.append(
                to_row(number, record, columns)
                if isinstance(record, dict)
                else Skip(number, record)
            )
        batch = RowBatch.of(items, columns)
    return batch


def _arrow_batch(
    block: bytes, first_line: int, max_row_bytes: int, columns: ColumnMap
) -> RowBatch | None:
    """The rows of a block of whole JSON lines parsed by pyarrow, or None when the block is not
    plain (see the module's docstring) and must be read line by line."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    view = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(view == _NEWLINE)
    if not block.endswith(b"\n"):
        ends = np.append(ends, len(block))
    starts = np.concatenate([[0], ends[:-1] + 1])
    if (
        (ends - starts).max() > max_row_bytes
        or (view[starts] != _OPEN_BRACE).any()  # blank lines, a BOM, leading spaces, not objects
    ):
        return None
    try:
        block.decode("utf-8")  # pyarrow does not check every string of every field
        table = pa_json.read_json(pa.py_buffer(block), memory_pool=pa.system_memory_pool())
    except (pa.ArrowException, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    if table.num_rows != starts.size:  # several objects on one line
        return None
    wanted = [columns.text, columns.text_pair, columns.label]
    cells: list[list[str | None] | None] = []
    for name in wanted:
        if name is None:
            cells.append(None)
            continue
        if name not in table.column_names:
            return None
        column = table.column(name)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            cells.append(column.to_pylist())
        elif name == columns.label and (
            pa.types.is_int64(column.type) or pa.types.is_boolean(column.type)
        ):
            cells.append(column.cast(pa.string()).to_pylist())  # str(int); "true" / "false"
        else:
            return None
    texts, pairs, labels = cells
    assert texts is not None
    if all(
        column is None or all(v is not None and v.strip() for v in column)
        for column in (texts, pairs, labels)
    ):
        numbers = list(range(first_line, first_line + len(texts)))
        return RowBatch(numbers, texts, pairs, labels, [])  # type: ignore[arg-type]
    keep = [
        i
        for i in range(len(texts))
        if all(c is None or (c[i] is not None and c[i].strip()) for c in (texts, pairs, labels))  # type: ignore[union-attr]
    ]
    kept = set(keep)
    return RowBatch(
        [first_line + i for i in keep],
        [texts[i] for i in keep],  # type: ignore[misc]
        [pairs[i] for i in keep] if pairs is not None else None,  # type: ignore[misc]
        [labels[i] for i in keep] if labels is not None else None,  # type: ignore[misc]
        [Skip(first_line + i, MissingValues.code) for i in range(len(texts)) if i not in kept],
    )
