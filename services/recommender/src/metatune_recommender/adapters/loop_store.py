"""Each study's loop state, durable in the KV bucket ``metatune_studies`` (key ``<study id>.loop``).

Why KV, and not a rebuild from the stream: the recommender's NATS user may read only its own
consumers' subjects, and ``metatune.jobs.requested`` carries every study's requests, so reading a
study's back would mean scanning them all at each completion, or replaying the log into memory
at start-up and keeping every stopped study in memory ever after (to refuse its late events).
One small record per study, read and written by key, is the simplest thing that is correct: the
bucket is already the recommender's (it keeps each study's best there for the agents), and its
user may already write any key of it.

A record is the :class:`StudyLoop` plus its outbox, the events of the last decision. A decision
is written (with the outbox) before its events are published, and the outbox is emptied once they
are: a process killed in between publishes the outbox again at the study's next event (same
event ids: the stream de-duplicates them), and never decides a slot twice. Every write is
conditional on the revision read (compare-and-set), so two replicas cannot both decide.
Once a study stopped, its record shrinks to that fact (no configurations kept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from pydantic import BaseModel

from metatune.bus import STUDIES_BUCKET
from metatune.contracts import JobRequested, StudyStopped
from metatune.errors import MetaTuneError

from ..domain.study_loop import StudyLoop


class LoopStateConflict(MetaTuneError):
    """The study's loop record changed since it was read (another replica decided): retried."""


class LoopRecord(BaseModel):
    loop: StudyLoop
    requests: list[JobRequested] = []  # the outbox: published after the record is written
    stop: StudyStopped | None = None

    @property
    def outbox(self) -> bool:
        return bool(self.requests) or self.stop is not None


class LoopStore:
    """Load and save :class:`LoopRecord` s in KV, compare-and-set on the revision read."""

    def __init__(self, js: Callable[[], Any]) -> None:
        """``js``: the service's JetStream context, looked up at each use (it connects later)."""
        self._js = js

    @staticmethod
    def key(study_id: UUID) -> str:
        return f"{study_id}.loop"

    async def load(self, study_id: UUID) -> tuple[LoopRecord | None, int | None]:
        """The study's record and its revision (None, None: no record yet)."""
        kv = await self._js().key_value(STUDIES_BUCKET)
        try:
            entry = await kv.get(self.key(study_id))
        except KeyNotFoundError:  # and deleted
            return None, None
        if entry.value is None:
            return None, None
        return LoopRecord.model_validate_json(entry.value), entry.revision

    async def save(self, record: LoopRecord, revision: int | None) -> int:
        """Write ``record`` if the stored one is still at ``revision`` (None: there is none);
        returns the new revision."""
        kv = await self._js().key_value(STUDIES_BUCKET)
        key, value = self.key(record.loop.study_id), record.model_dump_json().encode()
        try:
            if revision is None:
                return await kv.create(key, value)
            return await kv.update(key, value, last=revision)
        except KeyWrongLastSequenceError as exc:
            raise LoopStateConflict(
                f"study {record.loop.study_id}: loop state changed since it was read"
            ) from exc
