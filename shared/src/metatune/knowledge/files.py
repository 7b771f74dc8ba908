"""Knowledge-base files: one :class:`KbFileHeader` JSON line, then one :class:`KbRun` per line.

Plain or gzip (recognised by its magic bytes, whatever the name). Files are appended to run by run
(``metatune kb build`` fsyncs each line), so a kill can leave a torn last line: reading drops it
and says so (``KbFile.torn``); :func:`repair_kb_file` also cuts it from the file so appending can
go on. A file of another kind or schema version is refused with a typed error.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .errors import KbFileError, KbSchemaMismatch
from .records import KB_SCHEMA_VERSION, KbFileHeader, KbRun

KB_FILE_KIND = KbFileHeader.model_fields["kind"].default
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class KbFile:
    header: KbFileHeader
    runs: list[KbRun]
    torn: bool = False  # the last line was cut short (a killed writer) and was dropped

    def by_id(self) -> dict[str, KbRun]:
        """Runs by id; a run id written twice keeps its last line."""
        return {run.run_id: run for run in self.runs}


def _read_bytes(path: Path) -> tuple[bytes, bool]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KbFileError(path, "no such file") from None
    except IsADirectoryError:
        raise KbFileError(path, "is a directory, not a knowledge-base file") from None
    if raw.startswith(_GZIP_MAGIC):
        try:
            return gzip.decompress(raw), True
        except (OSError, EOFError):  # a gzip cut short: read what decompresses
            with gzip.open(path, "rb") as handle:
                chunks = []
                try:
                    while chunk := handle.read(1 << 20):
                        chunks.append(chunk)
                except (OSError, EOFError):
                    pass
            return b"".join(chunks), True
    return raw, False


def _header(path: Path, line: bytes) -> KbFileHeader:
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise KbFileError(
            path, "not a MetaTune knowledge-base file (its first line is not JSON)"
        ) from None
    if not isinstance(data, dict) or data.get("kind") != KB_FILE_KIND:
        raise KbFileError(
            path, f"not a MetaTune knowledge-base file (no header line with kind {KB_FILE_KIND!r})"
        )
    if data.get("schema_version") != KB_SCHEMA_VERSION:
        raise KbSchemaMismatch(path, data.get("schema_version"), KB_SCHEMA_VERSION)
    try:
        return KbFileHeader.model_validate(data)
    except ValidationError as exc:
        raise KbFileError(path, f"invalid header: {exc.errors()[0]['msg']}") from None


def _parse(path: Path, raw: bytes) -> tuple[KbFile, int]:
    """The file's content and the byte length of its intact part (everything but a torn last line)."""
    complete = raw.endswith(b"\n")
    lines = raw.split(b"\n")
    if complete:
        lines = lines[:-1]
    intact = len(raw)
    torn = False
    if not complete and lines:
        last = lines[-1]
        try:
            json.loads(last)
        except (json.JSONDecodeError, UnicodeDecodeError):
            torn = True
            intact = len(raw) - len(last)
            lines = lines[:-1]
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        raise KbFileError(path, "empty: not a MetaTune knowledge-base file")
    header = _header(path, numbered[0][1])
    runs = []
    for number, line in numbered[1:]:
        try:
            runs.append(KbRun.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise KbFileError(
                path, f"line {number} is not a run: {where}: {first['msg']}"
            ) from None
    return KbFile(header=header, runs=runs, torn=torn), intact


def read_kb_file(path: Path | str) -> KbFile:
    """Header and runs of a knowledge-base file (plain or gzip); a torn last line is dropped."""
    path = Path(path)
    raw, _ = _read_bytes(path)
    return _parse(path, raw)[0]


def repair_kb_file(path: Path | str) -> KbFile:
    """Like :func:`read_kb_file`, and cut a torn last line from a plain file (or end a complete last
    line with its newline) so that runs can be appended again."""
    path = Path(path)
    raw, gzipped = _read_bytes(path)
    kb, intact = _parse(path, raw)
    if not gzipped and (intact < len(raw) or (raw and not raw.endswith(b"\n"))):
        keep = raw[:intact]
        if keep and not keep.endswith(b"\n"):
            keep += b"\n"
        path.write_bytes(keep)
    return kb


def write_kb_file(path: Path | str, header: KbFileHeader, runs: Iterable[KbRun]) -> int:
    """Write a whole knowledge-base file atomically (gzip when the name ends in ``.gz``); returns the
    number of runs written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [header.model_dump_json()]
    lines.extend(run.model_dump_json() for run in runs)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(lines) - 1
