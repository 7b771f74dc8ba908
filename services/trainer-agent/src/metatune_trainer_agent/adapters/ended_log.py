"""The assignments whose run ended at this agent, kept in its private data folder.

One event id per line, appended as each run's outcome is published, read back at start: an
assignment whose acknowledgement was lost (the bus down as the run ended, or the agent killed
between its outcome and its acknowledgement) is redelivered, to this process or to the agent
restarted, and is recognised rather than trained again (:class:`EndedAssignments`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from uuid import UUID

from metatune.private_files import private_dir

from ..domain.versions import ENDED_KEPT, EndedAssignments

log = logging.getLogger(__name__)


class EndedLog:
    def __init__(self, folder: Path, datacenter: str) -> None:
        self.path = private_dir(folder) / f"ended.{datacenter}.log"

    def load(self) -> EndedAssignments:
        """The ids recorded so far (the newest :data:`ENDED_KEPT`); a line that is not an id is skipped."""
        if not self.path.exists():
            return EndedAssignments()
        ids: list[UUID] = []
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            try:
                ids.append(UUID(line.strip()))
            except ValueError:
                log.warning("%s line %d is not an assignment id; skipped", self.path, number)
        if len(ids) > 2 * ENDED_KEPT:  # keep the file bounded: rewrite it with the newest
            self._rewrite(ids[-ENDED_KEPT:])
        return EndedAssignments.of(ids)

    def add(self, event_id: UUID) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as out:
            out.write(f"{event_id}\n")

    def _rewrite(self, ids: list[UUID]) -> None:
        draft = self.path.with_name(f"{self.path.name}.draft")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.writelines(f"{event_id}\n" for event_id in ids)
        draft.replace(self.path)
