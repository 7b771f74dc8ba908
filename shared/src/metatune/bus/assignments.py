"""Where a job is assigned now, as the scheduler records it in KV ``metatune_assignments``.

The scheduler writes a job's :class:`~metatune.contracts.CurrentAssignment` before it publishes the
assignment, so a run event of the job can only follow its record. Consumers that keep no
assignment state of their own (the recommender) read it here to refuse run events from any other
datacenter (:mod:`metatune.provenance`).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from nats.js.errors import KeyNotFoundError
from pydantic import ValidationError

from ..contracts import CurrentAssignment
from .streams import ASSIGNMENTS_BUCKET


async def current_assignment(js: Any, job_id: UUID) -> CurrentAssignment | None:
    """The job's latest assignment (None: never assigned, or the record is unreadable)."""
    kv = await js.key_value(ASSIGNMENTS_BUCKET)
    try:
        entry = await kv.get(str(job_id))
    except KeyNotFoundError:
        return None
    if not entry.value:
        return None
    try:
        return CurrentAssignment.model_validate_json(entry.value)
    except ValidationError:
        return None


async def assigned_datacenter(js: Any, job_id: UUID) -> str | None:
    """The datacenter the job is assigned to now (None: none)."""
    record = await current_assignment(js, job_id)
    return record.datacenter if record is not None else None
