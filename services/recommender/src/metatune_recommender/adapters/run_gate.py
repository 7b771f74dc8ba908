"""Run events count only from the datacenter their job is assigned to (:mod:`metatune.provenance`).

The recommender keeps no assignment state of its own: it reads each job's current assignment from
the scheduler's KV record (written before the assignment is published, so a genuine run event
always finds it). A completion or failure from anywhere else (a forgery under another agent's
credential, a stale report from where the job ran before it moved) requests no trial and writes no
knowledge-base row, and so never becomes the study's best that the agents' curve stopper reads.
"""

from __future__ import annotations

import logging

from metatune.bus.assignments import assigned_datacenter
from metatune.provenance import RunEvent, foreign
from metatune.service import Service

log = logging.getLogger("metatune.recommender.gate")


async def accepted(service: Service, event: RunEvent, subject: str, *, report: bool) -> bool:
    """Whether ``event`` (received on ``subject``) comes from its job's datacenter; if not, it is
    reported as a ``foreign_run_event`` error where ``report`` (one consumer reports it, the
    others only skip it)."""
    refusal = foreign(event, await assigned_datacenter(service.js, event.job_id), subject)
    if refusal is None:
        return True
    if report:
        await service.report_error(**refusal.report())
    else:
        log.info("%s", refusal.message)
    return False
