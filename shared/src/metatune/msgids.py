"""``Nats-Msg-Id`` values that are derived from a fact rather than taken from ``event_id``.

JetStream stores a message once per ``Nats-Msg-Id`` inside the stream's de-duplication window. A
producer that may publish the same fact twice (a redelivered input, a retry through an outage,
every service's ticker) derives the id from the fact, so the copies collapse; everything else is
sent under its ``event_id``. Producers and the AsyncAPI document both use these functions, so the
documented scheme is the one on the wire.

An id anyone can compute can be taken first: JetStream drops the genuine message as a copy. Every
agent may publish run events (under its own subject) and may read every job id and assignment, so
a run outcome's id is sealed with its agent's own secret key (:func:`sealed`): the same for the
agent's retries and restarts, unpredictable to its peers.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from uuid import UUID

SEALED_HEX = 32  # hex digits of a sealed id (128 bits of HMAC-SHA256)


def profiled(submission_event_id: UUID) -> str:
    """The profile of one submission (a redelivered submission is profiled again, stored once)."""
    return f"profiled-{submission_event_id}"


def forecast(region: str, hour: datetime) -> str:
    """One region's forecast for one clock hour."""
    return f"forecast-{region}-{hour.isoformat()}"


def sealed(key: bytes, *fact: str) -> str:
    """``fact`` sealed with ``key``: the same for the same fact and key, unpredictable without it."""
    mac = hmac.new(key, "\x1f".join(fact).encode(), hashlib.sha256)
    return mac.hexdigest()[:SEALED_HEX]


def completed(key: bytes, job_id: UUID, datacenter: str) -> str:
    """A job completes once per datacenter: an agent's retries collapse, while a completion from
    the datacenter the job has moved to is not taken for a copy of a stale one from where it ran.
    ``key``: the publishing agent's own secret."""
    return f"completed-{sealed(key, 'completed', datacenter, str(job_id))}"


def paused(key: bytes, assignment_event_id: UUID) -> str:
    """The pause of the run that one start / resume assignment began (``key``: the agent's)."""
    return f"paused-{sealed(key, 'paused', str(assignment_event_id))}"


def failed(key: bytes, assignment_event_id: UUID) -> str:
    """The failure of the run one start / resume assignment began (``key``: the agent's)."""
    return f"failed-{sealed(key, 'failed', str(assignment_event_id))}"


def tick(hour: datetime) -> str:
    """One tick per hour, however many services publish it."""
    return f"tick-{hour.isoformat()}"
