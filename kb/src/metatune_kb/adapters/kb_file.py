"""The knowledge-base file a build writes: the runs already in it, one more run appended, parts merged.

Apart from the build so that ``metatune kb merge`` reads and writes files without loading the
training stack (torch, transformers, the profiler): seconds of CPU a process.
"""

from __future__ import annotations

import os
from pathlib import Path

from metatune.knowledge.errors import KbFileError, KbSchemaMismatch, KnowledgeBaseError
from metatune.knowledge.files import repair_kb_file
from metatune.knowledge.records import KbRun


class BuildError(KnowledgeBaseError, RuntimeError):
    """The build cannot go on (an output file of another kind or version, a dataset folder without data)."""


def read_existing(out: Path) -> dict[str, KbRun]:
    """Runs already in ``out``; a torn last line is cut off; another file kind or version is refused."""
    if not out.exists() or out.stat().st_size == 0:
        return {}
    try:
        return repair_kb_file(out).by_id()
    except KbSchemaMismatch as exc:
        raise BuildError(f"{exc}: use another --out") from exc
    except KbFileError as exc:
        raise BuildError(str(exc)) from exc


def append_line(out: Path, line: str) -> None:
    """One line at the end of ``out``, on disk (fsynced) before this returns."""
    with out.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def merge_files(out: Path, parts: list[Path]) -> tuple[int, int]:
    """Append to ``out`` the runs of ``parts`` it lacks; returns (added, total). Every file must be a
    knowledge-base file of this schema version; ``out`` takes the first part's header if it is new."""
    existing = read_existing(out)
    added = 0
    for part in parts:
        runs = read_existing(part)
        if not out.exists() or out.stat().st_size == 0:
            first_line = part.read_text(encoding="utf-8").split("\n", 1)[0]
            append_line(out, first_line)
        for run_id, run in runs.items():
            if run_id not in existing:
                append_line(out, run.model_dump_json())
                existing[run_id] = run
                added += 1
    return added, len(existing)
