"""Anticipated demand: the jobs requested on past days, expected again at the same hours.

A plan that knows only the jobs requested so far puts flexible work in the cleanest
datacenters' later hours, and the jobs requested meanwhile find those hours taken and go to
dirtier grids. Adding the demand expected over the next hours as *optional* jobs (they hold
room where that pays, are dropped before any requested hour, and are never published) makes
the plan run work now where later room will be wanted.

The forecast is seasonal-naive over days: each future hour expects the requests made at the
same hour of the ``history_days`` most recent days already observed for it, each counted
``1 / history_days`` (anticipated jobs are fluid, so a share of a job is expected demand). It is
computed from the requests in the event log only, so a restart rebuilds the same plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import uuid5

from .planner import JobSnapshot

DAY_H = 24
MAX_LOOKAHEAD_H = (
    3 * DAY_H
)  # the longest window a job of the carbon benchmark has (24 h of work + 48 h slack)


@dataclass(frozen=True)
class Request:
    """A job as it was requested: all its hours, no location yet."""

    hour: int  # epoch hour of the request
    job: JobSnapshot


def history_hours(lookahead_h: int, history_days: int = 1) -> int:
    """How far back requests are needed to anticipate ``lookahead_h`` hours from ``history_days`` days."""
    return DAY_H * (-(-lookahead_h // DAY_H) + history_days - 1)


def anticipated_jobs(
    requests: Iterable[Request],
    now_hour: int,
    lookahead_h: int = DAY_H,
    history_days: int = 1,
    observed_since: int | None = None,
) -> list[JobSnapshot]:
    """Optional jobs expected to arrive in (now, now + lookahead_h]: a request made ``k`` days
    before such an hour is expected again then if ``k`` is among the ``history_days`` most recent
    days already observed for that hour, with weight 1 / (those days that lie after
    ``observed_since``, the first hour requests were recorded: a young log is not read as low
    demand). ``lookahead_h`` 0 anticipates nothing; with one day of history and 24 h it is
    yesterday's requests a day on."""
    if not 0 <= lookahead_h <= MAX_LOOKAHEAD_H:
        raise ValueError(f"lookahead_h must be within 0..{MAX_LOOKAHEAD_H}, got {lookahead_h}")
    if history_days < 1:
        raise ValueError(f"history_days must be at least 1, got {history_days}")
    expected = []
    for request in requests:
        for days_back in range(1, history_hours(lookahead_h, history_days) // DAY_H + 1):
            ahead = request.hour + DAY_H * days_back - now_hour
            newest = -(-ahead // DAY_H)  # the most recent past day at this hour of the day
            if 0 < ahead <= lookahead_h and newest <= days_back < newest + history_days:
                seen = (
                    history_days
                    if observed_since is None
                    else sum(
                        now_hour + ahead - DAY_H * k >= observed_since
                        for k in range(newest, newest + history_days)
                    )
                )
                job = request.job
                expected.append(
                    dataclasses.replace(
                        job,
                        job_id=uuid5(job.job_id, f"anticipated/{days_back}"),
                        not_before_hour=now_hour + ahead,
                        deadline_hour=job.deadline_hour + DAY_H * days_back,
                        location=None,
                        pinned=False,
                        arriving_at=None,
                        anticipated=True,
                        weight=1.0 / max(seen, 1),
                    )
                )
    return expected
