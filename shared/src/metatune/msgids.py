"""``Nats-Msg-Id`` values that are derived from a fact rather than taken from ``event_id``.

JetStream stores a message once per ``Nats-Msg-Id`` inside the stream's de-duplication window. A
producer that may publish the same fact twice (a redelivered input, a retry through an outage,
every service's ticker) derives the id from the fact, so the copies collapse; everything else is
sent under its ``event_id``. Producers and the AsyncAPI document both use these functions, so the
documented scheme is the one on the wire.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID


def profiled(submission_event_id: UUID) -> str:
    """The profile of one submission (a redelivered submission is profiled again, stored once)."""
    return f"profiled-{submission_event_id}"


def forecast(region: str, hour: datetime) -> str:
    """One region's forecast for one clock hour."""
    return f"forecast-{region}-{hour.isoformat()}"


def completed(job_id: UUID, datacenter: str) -> str:
    """A job completes once per datacenter: an agent's retries collapse, while a completion from
    the datacenter the job has moved to is not taken for a copy of a stale one from where it ran."""
    return f"completed-{datacenter}-{job_id}"


def paused(assignment_event_id: UUID) -> str:
    """The pause of the run that one start / resume assignment began."""
    return f"paused-{assignment_event_id}"


def failed(assignment_event_id: UUID) -> str:
    """The failure of the run one start / resume assignment began."""
    return f"failed-{assignment_event_id}"


def tick(hour: datetime) -> str:
    """One tick per hour, however many services publish it."""
    return f"tick-{hour.isoformat()}"
