"""Whose run event it is: a run event counts only from the datacenter its job is assigned to.

Run events carry their agent's datacenter in the subject (``metatune.runs.<dc>.completed``, ...),
and the server lets an agent publish only under its own (``metatune.runs.<dc>.>``), so the
subject's datacenter is authenticated; the payload's ``datacenter`` is not. Every consumer of run
events (scheduler, recommender and its knowledge base, telemetry) accepts one only when the
subject's datacenter, the payload's and the one the job is assigned to at that time are the same
datacenter. Anything else (a forgery, or a stale report from where the job ran before it moved)
becomes a ``foreign_run_event`` error event and changes nothing: which report came first no longer
decides what is true.

Pure: the assignment is looked up by the caller (its own state, KV, its database), or, for a
reader of the event log in stream order (the CLI's and the client's folds, the demo, telemetry
within a batch), kept by :class:`AssignmentLog` from the assignments read before.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from . import subjects
from .contracts import (
    Assignment,
    ErrorKind,
    Event,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
)

RunEvent = RunProgress | RunPaused | RunCompleted | RunFailed
RUN_EVENTS = (RunProgress, RunPaused, RunCompleted, RunFailed)
FOREIGN_RUN_EVENT = "foreign_run_event"


@dataclass(frozen=True)
class ForeignRunEvent:
    """A run event refused: where it came from and where its job is assigned."""

    job_id: UUID
    event_id: UUID
    kind: str  # progress, paused, completed, failed
    sent_from: str | None  # the subject's datacenter (None: not known to the caller)
    claimed: str  # the payload's datacenter
    assigned: str | None  # where the job is assigned (None: nowhere yet)
    subject: str | None = None

    @property
    def message(self) -> str:
        source = self.sent_from or self.claimed
        if self.sent_from is not None and self.sent_from != self.claimed:
            why = f"published under {self.sent_from} but claims {self.claimed}"
        elif self.assigned is None:
            why = "the job is assigned to no datacenter"
        else:
            why = f"the job is assigned to {self.assigned}"
        return f"run event ({self.kind}) of job {self.job_id} from {source} refused: {why}"

    def report(self) -> dict[str, Any]:
        """Keyword arguments of ``Service.report_error`` for this refusal."""
        return {
            "code": FOREIGN_RUN_EVENT,
            "kind": ErrorKind.bad_input,
            "message": self.message,
            "subject": self.subject,
            "correlation_id": self.job_id,
            "details": {
                "job_id": str(self.job_id),
                "event_id": str(self.event_id),
                "run_event": self.kind,
                "datacenter": self.sent_from or self.claimed,
                "claimed_datacenter": self.claimed,
                "assigned_datacenter": self.assigned,
            },
        }


def kind_of(event: RunEvent) -> str:
    match event:
        case RunProgress():
            return "progress"
        case RunPaused():
            return "paused"
        case RunCompleted():
            return "completed"
    return "failed"


def foreign(
    event: RunEvent, assigned: str | None, subject: str | None = None
) -> ForeignRunEvent | None:
    """Why ``event`` must be refused (None: it comes from where its job is assigned).

    ``subject``: the subject it arrived on, whose datacenter must be the payload's (None: the
    caller checked that already, e.g. the scheduler's state, fed by handlers that did)."""
    sent_from = subjects.run_event_datacenter(subject) if subject is not None else None
    if subject is not None and sent_from is None:
        sent_from = "?"  # not a run-event subject at all: nothing vouches for the payload
    if (sent_from is None or sent_from == event.datacenter) and assigned == event.datacenter:
        return None
    return ForeignRunEvent(
        job_id=event.job_id,
        event_id=event.event_id,
        kind=kind_of(event),
        sent_from=sent_from,
        claimed=event.datacenter,
        assigned=assigned,
        subject=subject,
    )


class AssignmentLog:
    """The rule applied to an event log read in stream order: a run event is judged against its
    job's latest assignment read before it (``assigned``: those known from earlier, by job)."""

    def __init__(self, assigned: dict[UUID, str] | None = None) -> None:
        self.assigned = dict(assigned or {})

    def judge(self, subject: str, event: Event) -> ForeignRunEvent | None:
        """Why ``event``, read on ``subject``, must be refused (None: it counts, or it is no run
        event); an assignment moves its job."""
        if isinstance(event, Assignment):
            self.assigned[event.job_id] = event.datacenter
        elif isinstance(event, RUN_EVENTS):
            return foreign(event, self.assigned.get(event.job_id), subject)
        return None


def mislabelled(event: RunEvent, subject: str) -> ForeignRunEvent | None:
    """The subject's datacenter is not the payload's (whatever the assignment)."""
    refusal = foreign(event, event.datacenter, subject)
    return replace(refusal, assigned=None) if refusal is not None else None


__all__ = [
    "FOREIGN_RUN_EVENT",
    "RUN_EVENTS",
    "AssignmentLog",
    "ForeignRunEvent",
    "RunEvent",
    "foreign",
    "kind_of",
    "mislabelled",
]
