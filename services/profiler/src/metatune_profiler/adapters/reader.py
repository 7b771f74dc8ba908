"""Stream the rows of a CSV, JSON-lines, Parquet or plain-text dataset file with bounded memory.

Files may be gzip-compressed (detected from the magic bytes). ``Dataset.rows()`` yields rows one
at a time (Parquet: read one record batch at a time); ``Dataset.batches()`` yields the same rows
as columns of a few thousand (:class:`~..domain.rows.RowBatch`). A row that cannot be used
becomes a :class:`~..domain.rows.Skip` (the physical line where it starts, for text formats; the
record index, for Parquet). JSON lines in batches: the file is cut into blocks of whole lines
(``JSONL_BLOCK_BYTES``), each parsed by :func:`~..domain.rows.parse_jsonl_block`.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from metatune.contracts import DatasetFormat

from ..domain.columns import ColumnMap, ColumnRequest, resolve_columns
from ..domain.errors import (
    EmptyDataset,
    FileTooLarge,
    MalformedRows,
    NotUtf8,
    ProfileDatasetNotFound,
    RowTooLarge,
    UnreadableDataset,
)
from ..domain.rows import (
    ReadLimits,
    Row,
    RowBatch,
    Skip,
    jsonl_lines,
    parse_jsonl_block,
    split_lines,
    to_row,
)

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
TEXT_FIELD = "text"
PEEK_ROWS = 100  # rows read ahead to find the field names of a JSON-lines file
PARQUET_BATCH_ROWS = 2048
BATCH_ROWS = 4096  # rows per RowBatch from formats read row by row
JSONL_BLOCK_BYTES = 1 << 18  # JSON lines parsed together by pyarrow (256 KiB)
_SURROGATE = re.compile("[\udc80-\udcff]")  # what errors="surrogateescape" makes of invalid UTF-8
_EXTENSIONS = {
    ".csv": DatasetFormat.csv,
    ".tsv": DatasetFormat.csv,
    ".jsonl": DatasetFormat.jsonl,
    ".ndjson": DatasetFormat.jsonl,
    ".json": DatasetFormat.jsonl,
    ".parquet": DatasetFormat.parquet,
    ".pq": DatasetFormat.parquet,
    ".txt": DatasetFormat.text,
    ".text": DatasetFormat.text,
}


@dataclass
class _CsvProgress:
    """How far the CSV reader's line source has read: the line, the bytes, lines cut as too long."""

    line: int = 0
    bytes: int = 0
    oversize: set[int] = field(default_factory=set)


class _CountingReader(io.RawIOBase):
    """Counts decompressed bytes so a small gzip file cannot expand past the size limit."""

    def __init__(self, inner: io.BufferedIOBase, limit: int) -> None:
        self._inner, self._limit, self.count = inner, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        n = self._inner.readinto(buffer)
        self.count += n
        if self.count > self._limit:
            raise FileTooLarge(
                f"the dataset decompresses to more than the limit of {self._limit:,} bytes"
            )
        return n

    def close(self) -> None:
        self._inner.close()
        super().close()


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_binary(path: Path, limits: ReadLimits) -> BinaryIO:
    """The file's bytes, decompressed if gzip'd, never more than ``max_file_bytes`` of them."""
    if _is_gzip(path):
        # the reader owns the gzip stream and closes it with itself, which the caller closes
        raw = _CountingReader(gzip.open(path, "rb"), limits.max_file_bytes)  # noqa: SIM115
        return io.BufferedReader(raw, buffer_size=1 << 20)
    return open(path, "rb", buffering=1 << 20)


def detect_format(path: Path, limits: ReadLimits) -> DatasetFormat:
    """From the extension (ignoring ``.gz``), else from the first bytes."""
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    if suffixes and suffixes[-1] in _EXTENSIONS:
        return _EXTENSIONS[suffixes[-1]]
    with open_binary(path, limits) as fh:
        head = fh.read(4096)
    if head.startswith(PARQUET_MAGIC):
        return DatasetFormat.parquet
    first = head.lstrip().splitlines()[0] if head.strip() else b""
    if first.startswith(b"{"):
        return DatasetFormat.jsonl
    if any(sep in first for sep in (b",", b"\t")) and b" " not in first.strip():
        return DatasetFormat.csv
    return DatasetFormat.text


class Dataset:
    """One opened dataset: its format, resolved columns and a single pass over its rows."""

    def __init__(
        self,
        path: Path,
        request: ColumnRequest,
        limits: ReadLimits,
        fmt: DatasetFormat | None = None,
    ) -> None:
        self.path, self.limits = path, limits
        if not path.is_file():
            raise ProfileDatasetNotFound(f"no dataset file at {path}")
        size = path.stat().st_size
        if size == 0:
            raise EmptyDataset(f"{path.name} is empty (0 bytes)")
        if size > limits.max_file_bytes:
            raise FileTooLarge(
                f"{path.name} is {size:,} bytes, over the limit of {limits.max_file_bytes:,}",
                details={"size_bytes": size, "limit_bytes": limits.max_file_bytes},
            )
        self.size_bytes = size
        self.format = fmt or detect_format(path, limits)
        opener = {
            DatasetFormat.jsonl: self._open_jsonl,
            DatasetFormat.csv: self._open_csv,
            DatasetFormat.parquet: self._open_parquet,
            DatasetFormat.text: self._open_text,
        }[self.format]
        self.columns, self._rows = opener(request)

    def rows(self) -> Iterator[Row | Skip]:
        return self._rows

    # ---------------------------------------------------------------- JSON lines
    def _open_jsonl(self, request: ColumnRequest) -> tuple[ColumnMap, Iterator[Row | Skip]]:
        records = self._peek_source = self._jsonl_records()
        peeked: list[tuple[int, dict[str, Any] | str]] = []
        fields: list[str] | None = None
        for item in records:
            peeked.append(item)
            if isinstance(item[1], dict):
                fields = list(item[1])
                break
            if len(peeked) >= PEEK_ROWS:
                break
        if fields is None:
            if not peeked:
                raise EmptyDataset(f"{self.path.name} has no rows")
            number, reason = peeked[0]
            raise _first_row_error(str(reason), number, self.format)
        columns = resolve_columns(fields, request)

        def rows() -> Iterator[Row | Skip]:
            for number, record in chain(peeked, records):
                yield (
                    to_row(number, record, columns)
                    if isinstance(record, dict)
                    else Skip(number, record)
                )

        return columns, rows()

    def _jsonl_records(self) -> Generator[tuple[int, dict[str, Any] | str]]:
        """(line, object) or (line, skip reason); blank lines are not rows."""
        with open_binary(self.path, self.limits) as fh:
            yield from jsonl_lines(fh, self.limits.max_row_bytes)

    def batches(self) -> Iterator[RowBatch]:
        """The rows of :meth:`rows` (which must not have been iterated), as column batches."""
        if self.format is DatasetFormat.jsonl:
            self._peek_source.close()  # the column peek's file; batches read it from the start
            yield from self._jsonl_batches()
            return
        items: list[Row | Skip] = []
        for item in self._rows:
            items.append(item)
            if len(items) >= BATCH_ROWS:
                yield RowBatch.of(items, self.columns)
                items = []
        if items:
            yield RowBatch.of(items, self.columns)

    def _jsonl_batches(self) -> Iterator[RowBatch]:
        limit = self.limits.max_row_bytes
        for first_line, block in self.jsonl_blocks():
            yield parse_jsonl_block(first_line, block, limit, self.columns)

    def jsonl_blocks(self) -> Iterator[tuple[int, bytes | Skip]]:
        """The blocks of whole lines :meth:`batches` parses, in file order, as (first line, block)
        (JSON lines only; :meth:`rows` must not have been iterated)."""
        self._peek_source.close()
        with open_binary(self.path, self.limits) as fh:
            yield from _line_blocks(fh, self.limits.max_row_bytes)

    # ---------------------------------------------------------------- plain text
    def _open_text(self, request: ColumnRequest) -> tuple[ColumnMap, Iterator[Row | Skip]]:
        columns = resolve_columns([TEXT_FIELD], request.model_copy(update={"text": None}))

        def rows() -> Iterator[Row | Skip]:
            with open_binary(self.path, self.limits) as fh:
                for number, line in split_lines(fh, self.limits.max_row_bytes):
                    if line is None:
                        yield Skip(number, RowTooLarge.code)
                        continue
                    try:
                        text = line.decode("utf-8")
                    except UnicodeDecodeError:
                        yield Skip(number, NotUtf8.code)
                        continue
                    if text.strip():
                        yield Row(number, text, None, None)

        return columns, rows()

    # ---------------------------------------------------------------- CSV / TSV
    def _open_csv(self, request: ColumnRequest) -> tuple[ColumnMap, Iterator[Row | Skip]]:
        csv.field_size_limit(max(csv.field_size_limit(), self.limits.max_row_bytes))
        fh = open_binary(self.path, self.limits)
        state = _CsvProgress()

        def text_lines() -> Iterator[str]:
            for number, line in split_lines(fh, self.limits.max_row_bytes):
                state.line = number
                if line is None:
                    state.oversize.add(number)
                    line = b""
                state.bytes += len(line)
                yield line.decode("utf-8", errors="surrogateescape") + "\n"

        lines = text_lines()
        first = next(lines, None)
        if first is None or not first.strip():
            fh.close()
            raise EmptyDataset(f"{self.path.name} has no header row")
        if _SURROGATE.search(first):
            fh.close()
            raise NotUtf8("the CSV header is not valid UTF-8", row=1)
        delimiter = (
            "\t"
            if self.path.name.lower().removesuffix(".gz").endswith(".tsv")
            else max(",\t;|", key=first.count)
        )
        header = next(csv.reader([first], delimiter=delimiter))
        columns = resolve_columns(header, request)
        limit = self.limits.max_row_bytes

        def rows() -> Iterator[Row | Skip]:
            reader = csv.reader(lines, delimiter=delimiter)
            with fh:
                while True:
                    start_line, start_bytes = state.line + 1, state.bytes
                    try:
                        fields = next(reader)
                    except StopIteration:
                        return
                    except csv.Error:
                        yield Skip(start_line, MalformedRows.code)
                        continue
                    if (
                        any(start_line <= n <= state.line for n in state.oversize)
                        or state.bytes - start_bytes > limit
                    ):
                        state.oversize.clear()
                        yield Skip(start_line, RowTooLarge.code)
                        continue
                    if not fields:
                        continue
                    if len(fields) != len(header):
                        yield Skip(start_line, MalformedRows.code)
                        continue
                    if any(_SURROGATE.search(f) for f in fields):
                        yield Skip(start_line, NotUtf8.code)
                        continue
                    yield to_row(start_line, dict(zip(header, fields, strict=True)), columns)

        return columns, rows()

    # ---------------------------------------------------------------- Parquet
    def _open_parquet(self, request: ColumnRequest) -> tuple[ColumnMap, Iterator[Row | Skip]]:
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(self.path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for corrupt files
            raise UnreadableDataset(
                f"{self.path.name} is not a readable Parquet file: {exc}"
            ) from exc
        if parquet.metadata.num_rows == 0:
            raise EmptyDataset(f"{self.path.name} has no rows")
        columns = resolve_columns(parquet.schema_arrow.names, request)
        wanted = [c for c in (columns.text, columns.text_pair, columns.label) if c]
        limit = self.limits.max_row_bytes

        def rows() -> Iterator[Row | Skip]:
            number = 0
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=wanted):
                for record in batch.to_pylist():
                    number += 1
                    for key, value in record.items():
                        if isinstance(value, bytes):
                            try:
                                record[key] = value.decode("utf-8")
                            except UnicodeDecodeError:
                                record[key] = NotUtf8
                    if any(v is NotUtf8 for v in record.values()):
                        yield Skip(number, NotUtf8.code)
                    elif sum(len(v) for v in record.values() if isinstance(v, str)) > limit:
                        yield Skip(number, RowTooLarge.code)
                    else:
                        yield to_row(number, record, columns)

        return columns, rows()


def _line_blocks(fh: BinaryIO, max_row_bytes: int) -> Iterator[tuple[int, bytes | Skip]]:
    """(number of the first line, about JSONL_BLOCK_BYTES of whole lines), in file order; a line
    over ``max_row_bytes`` that outgrows a block is passed over unread, as a Skip."""
    number, pending = 1, b""
    while True:
        block = fh.read(JSONL_BLOCK_BYTES)
        if not block:
            if pending:
                yield number, pending
            return
        data = pending + block
        cut = data.rfind(b"\n") + 1
        if cut:
            yield number, data[:cut]
            number += data.count(b"\n", 0, cut)
        pending = data[cut:]
        if len(pending) > max_row_bytes:  # a line already too long: skip to its end, as _lines does
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield number, Skip(number, RowTooLarge.code)
            number, pending = number + 1, b""


def _first_row_error(reason: str, row: int, fmt: DatasetFormat) -> Exception:
    from ..domain.errors import SKIP_REASON_ERRORS

    error = SKIP_REASON_ERRORS.get(reason, UnreadableDataset)
    return error(
        f"no usable {fmt.value} row in the first {PEEK_ROWS} rows; row {row}: {reason}", row=row
    )
