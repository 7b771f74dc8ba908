"""Random planning scenarios (hypothesis) and the promises every plan of them must keep."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from metatune_scheduler.domain import Aggregation, SiteSnapshot
from metatune_scheduler.domain.planner import JobSnapshot

from .conftest import job_id

FIRST_HOUR = 480_000


@st.composite
def scenarios(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    n_sites, n_jobs = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    names = [f"dc{d}" for d in range(n_sites)]
    sites = [
        SiteSnapshot(
            name, float(rng.uniform(1, 1.5)), int(rng.integers(2, 9)), rng.uniform(20, 600, 168)
        )
        for name in names
    ]
    jobs = []
    pinned_gpus = dict.fromkeys(names, 0)
    for j in range(n_jobs):
        need = int(rng.integers(1, 8))
        allowed = frozenset(n for n in names if rng.random() < 0.7) or frozenset(names[:1])
        location = str(rng.choice(sorted(allowed))) if rng.random() < 0.3 else None
        gpus = int(rng.integers(1, 5))
        capacity = next((site.gpus for site in sites if site.name == location), 0)
        pinned = (
            location is not None and rng.random() < 0.5 and pinned_gpus[location] + gpus <= capacity
        )
        if pinned:  # a running job holds its GPUs: the agent never runs more than it has
            pinned_gpus[location] += gpus
        jobs.append(
            JobSnapshot(
                job_id=job_id(j),
                need_hours=need,
                gpus=gpus,
                power_kw=float(rng.uniform(0.3, 5)),
                deadline_hour=FIRST_HOUR + need + int(rng.integers(0, 30)),
                allowed=allowed,
                home=names[0],
                location=location,
                pinned=pinned,
            )
        )
    aggregation = draw(
        st.sampled_from(
            [Aggregation(horizon=48, hourly=12, blocks=((48, 3),)), Aggregation.none(48)]
        )
    )
    return jobs, sites, aggregation


def check_plan(result, jobs, sites, aggregation) -> None:
    late = {item.job_id: item for item in result.infeasible}
    gpus = {site.name: site.gpus for site in sites}
    used: dict[tuple[str, int], int] = {}
    for job in jobs:
        if job.job_id in late and late[job.job_id].earliest_finish_hour is None:
            assert (
                job.job_id not in result.jobs
            )  # cannot run anywhere allowed: reported, not planned
            continue
        planned = result.jobs[job.job_id]
        hours = [h for h, _, _ in planned.slots]
        assert (
            len(hours) == len(set(hours)) == job.need_hours
        )  # exactly its hours, one place at a time
        deadline = (
            late[job.job_id].earliest_finish_hour if job.job_id in late else job.deadline_hour
        )
        assert max(hours) < max(deadline, job.deadline_hour) and min(hours) >= FIRST_HOUR
        assert {dc for _, dc, _ in planned.slots} <= job.allowed
        if job.pinned:
            assert planned.at(FIRST_HOUR) == job.location
        for h, dc, _ in planned.slots:
            used[dc, h] = used.get((dc, h), 0) + job.gpus
    hourly_zone = FIRST_HOUR + aggregation.hourly
    for (dc, h), gpu_count in used.items():
        if (
            h < hourly_zone
        ):  # hour by hour where the plan is firm; per block beyond (see horizon.py)
            assert gpu_count <= gpus[dc]
    for item in result.infeasible:
        if item.earliest_finish_hour is not None:
            job = next(j for j in jobs if j.job_id == item.job_id)
            assert item.earliest_finish_hour > job.deadline_hour
