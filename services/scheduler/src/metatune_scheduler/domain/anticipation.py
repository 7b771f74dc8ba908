"""Anticipated demand: the jobs requested over the last day, expected again a day later.

A plan that knows only the jobs requested so far puts flexible work in the cleanest
datacenters' later hours, and the jobs requested meanwhile find those hours taken and go to
dirtier grids. Adding the requests of the last day, shifted by a day, as *optional* jobs (they
hold room where that pays, are dropped before any requested hour, and are never published)
makes the plan run work now where later room will be wanted. It is a seasonal-naive forecast of
demand, computed from the requests in the event log only, so a restart rebuilds the same plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import uuid5

from .planner import JobSnapshot

DAY_H = 24


@dataclass(frozen=True)
class Request:
    """A job as it was requested: all its hours, no location yet."""

    hour: int  # epoch hour of the request
    job: JobSnapshot


def anticipated_jobs(requests: Iterable[Request], now_hour: int, lookahead_h: int = DAY_H) -> list[JobSnapshot]:
    """The requests of the last ``lookahead_h`` hours repeated one day later, as optional jobs
    arriving in (now, now + lookahead_h]; ``lookahead_h`` 0 anticipates nothing."""
    if not 0 <= lookahead_h <= DAY_H:
        raise ValueError(f"lookahead_h must be within 0..{DAY_H}, got {lookahead_h}")
    expected = []
    for request in requests:
        arrival = request.hour + DAY_H
        if now_hour < arrival <= now_hour + lookahead_h:
            expected.append(dataclasses.replace(
                request.job, job_id=uuid5(request.job.job_id, "anticipated"), not_before_hour=arrival,
                deadline_hour=request.job.deadline_hour + DAY_H, location=None, pinned=False, arriving_at=None,
                anticipated=True,
            ))
    return expected
