"""Which events a study's webhook hears about, as state changes, and the body it receives.

Users want to know when their study or a trial changes state (profiled, requested, infeasible,
cancelled, completed, failed, or an error about their input), not every progress tick, and each
state once: the scheduler re-publishes ``jobs.infeasible`` every hour while a job stays
infeasible, which is one state, so one notification. The body follows the Standard Webhooks
payload shape (``type``, ``timestamp``, ``data``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from metatune import contracts as c
from metatune.display import EARLY_STOPPED
from metatune.redaction import redact

from ...domain.events import clean_text

_STATES: dict[type, tuple[str, str]] = {  # contract -> (event type, state)
    c.DatasetProfiled: ("study.profiled", "profiled"),
    c.JobRequested: ("job.requested", "requested"),
    c.JobInfeasible: ("job.infeasible", "infeasible"),
    c.JobCancelled: ("job.cancelled", "cancelled"),
    c.RunCompleted: ("job.completed", "completed"),
    c.RunFailed: ("job.failed", "failed"),
}


@dataclass(frozen=True)
class Notification:
    entity_id: str  # whose state changed: "job:<id>", "study:<id>", or an error's "<ref>:error:<service>:<code>"
    state: str
    event_type: str
    ref: UUID  # the study id, else the job id, the notification belongs to (the webhook is the study's)
    event_id: UUID

    @property
    def message_id(self) -> str:
        """The ``webhook-id``: one per state change, stable across retries."""
        return f"msg_{self.event_id.hex}"


def notification_for(event: c.Event) -> Notification | None:
    """The state change ``event`` announces, or None when it announces none."""
    if isinstance(event, c.ErrorEvent):
        if event.service == "telemetry" or not event.correlation_id:
            return None  # our own errors are about receivers, not about a study's input
        try:
            ref = UUID(event.correlation_id)
        except ValueError:
            return None
        return Notification(
            f"{ref}:error:{event.service}:{event.code}",
            "reported",
            "study.error",
            ref,
            event.event_id,
        )
    found = _STATES.get(type(event))
    if found is None:
        return None
    event_type, state = found
    if isinstance(event, c.RunCompleted) and event.early_stopped:  # in the words of every view
        event_type, state = "job.early_stopped", EARLY_STOPPED
    study, job = getattr(event, "study_id", None), getattr(event, "job_id", None)
    owner = study or job
    if owner is None:  # every event in _STATES names its study or its job
        return None
    entity = f"job:{job}" if job is not None else f"study:{study}"
    return Notification(entity, state, event_type, owner, event.event_id)


def webhook_body(notification: Notification, subject: str, event: c.Event) -> str:
    """The JSON body: Standard Webhooks shape, the event itself as ``data``."""
    data = {"subject": subject, "event": json.loads(event.model_dump_json())}
    return envelope(notification.event_type, event.occurred_at, data)


def envelope(event_type: str, at: datetime, data: dict[str, Any]) -> str:
    """A Standard Webhooks payload (``type``, ``timestamp``, ``data``) as compact, redacted JSON."""
    return redact(
        clean_text(
            json.dumps(
                {
                    "type": event_type,
                    "timestamp": at.isoformat().replace("+00:00", "Z"),
                    "data": data,
                },
                separators=(",", ":"),
                allow_nan=False,
            )
        )
    )
