"""carbon_preference: greenest waits for a cleaner hour, fastest starts at once (carbon only
breaking ties), balanced waits only when the saving beats its delay premium; in the full MILP,
in the fast path, and from a submission's spec through the scheduler."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import numpy as np
import pytest

from metatune.contracts import AssignmentAction, CarbonPreference, JobRequested
from metatune_scheduler.domain import (
    Aggregation,
    HighsModelSolver,
    Planner,
    Scheduler,
    SiteSnapshot,
    SolveLimits,
    fast_path,
)
from metatune_scheduler.domain.horizon import epoch_hour
from metatune_scheduler.domain.planner import JobSnapshot
from metatune_scheduler.domain.preferences import BALANCED_PREMIUM
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested

EXACT = SolveLimits(time_limit_s=30, mip_rel_gap=0.0)
GREENEST, BALANCED, FASTEST = (
    CarbonPreference.greenest,
    CarbonPreference.balanced,
    CarbonPreference.fastest,
)


def _job(preference: CarbonPreference, n: int = 1, hours: int = 2) -> JobSnapshot:
    return JobSnapshot(
        job_id=job_id(n),
        need_hours=hours,
        gpus=1,
        power_kw=1.0,
        deadline_hour=48,
        allowed=frozenset({"a", "b"}),
        home="a",
        preference=preference,
    )


def _site(name: str, values: list[float], pue: float = 1.0, gpus: int = 4) -> SiteSnapshot:
    return SiteSnapshot(name=name, pue=pue, gpus=gpus, intensity=np.resize(values, 168) * 1.0)


def dirty_now(cleaner_by: float, from_hour: int) -> list[float]:
    """300 g/kWh until ``from_hour``, then ``cleaner_by`` less for the rest of the week."""
    return [300.0] * from_hour + [300.0 - cleaner_by] * (168 - from_hour)


def _planned(preference: CarbonPreference, *sites: SiteSnapshot, full: bool = True):
    """(first hour, datacenter) a 2 h job is planned at, by the full solve or the fast path."""
    job = _job(preference)
    if full:
        plan = Planner(HighsModelSolver(EXACT), Aggregation.none(168)).plan(0, [job], list(sites))
        slots = plan.jobs[job.job_id].slots
    else:
        used = np.zeros((len(sites), 168))
        slots = fast_path.place([job], list(sites), used, 0, 0.03)[job.job_id].slots
    return min(h for h, _, _ in slots), slots[0][1]


@pytest.mark.parametrize("full", [True, False], ids=["full MILP", "fast path"])
def test_fastest_starts_at_once_where_greenest_waits(full: bool) -> None:
    site = _site("a", dirty_now(250, 4))  # 4 h from now the grid is 250 g/kWh cleaner
    assert _planned(GREENEST, site, full=full) == (4, "a")
    assert _planned(FASTEST, site, full=full) == (0, "a")


@pytest.mark.parametrize("full", [True, False], ids=["full MILP", "fast path"])
def test_fastest_breaks_ties_on_carbon(full: bool) -> None:
    """Both sites can start now: the cleaner one wins; a site that is cleaner but busy for an hour
    loses to finishing an hour earlier."""
    a, b = _site("a", dirty_now(0, 0)), _site("b", [100.0] * 168)
    assert _planned(FASTEST, a, b, full=full) == (0, "b")
    busy = dataclasses.replace(b, intensity=np.where(np.arange(168) < 1, 1e4, 100.0))
    if full:  # a whole-GPU job holds b's first hour
        other = dataclasses.replace(_job(GREENEST, n=2, hours=1), gpus=4, allowed=frozenset("b"))
        other = dataclasses.replace(other, deadline_hour=1)
        plan = Planner(HighsModelSolver(EXACT), Aggregation.none(168)).plan(
            0, [_job(FASTEST), other], [a, b]
        )
        assert min(h for h, _, _ in plan.jobs[job_id(1)].slots) == 0
        assert {dc for _, dc, _ in plan.jobs[job_id(1)].slots} == {"a"}
    else:
        used = np.zeros((2, 168))
        used[1, 0] = 4  # b's GPUs are taken in the first hour
        slots = fast_path.place([_job(FASTEST)], [a, busy], used, 0, 0.03)[job_id(1)].slots
        assert [(h, dc) for h, dc, _ in slots] == [(0, "a"), (1, "a")]


@pytest.mark.parametrize("full", [True, False], ids=["full MILP", "fast path"])
def test_balanced_waits_only_for_a_saving_above_its_premium(full: bool) -> None:
    # 12 h for 20 g/kWh: less than 12 x 3 g/kWh -> balanced starts now, greenest waits
    small = _site("a", dirty_now(20, 12))
    assert 12 * BALANCED_PREMIUM > 20
    assert _planned(GREENEST, small, full=full) == (12, "a")
    assert _planned(BALANCED, small, full=full) == (0, "a")
    # 4 h for 200 g/kWh: far above 4 x 3 -> balanced waits as greenest does, fastest does not
    large = _site("a", dirty_now(200, 4))
    assert _planned(BALANCED, large, full=full) == (4, "a")
    assert _planned(FASTEST, large, full=full) == (0, "a")


def _request(n: int, preference: CarbonPreference) -> JobRequested:
    request = job_requested(n, hours=2, home="fra1", deadline_h=48)
    spec = request.spec.model_copy(update={"carbon_preference": preference})
    return request.model_copy(update={"spec": spec})


def _scheduler() -> Scheduler:
    """fra1 alone, with a live agent: 300 g/kWh for 4 h, then 50."""
    scheduler = Scheduler(small_registry("fra1"))
    for dc in scheduler.registry.datacenters:
        scheduler.apply(dc.idle_status(NOW))
        scheduler.apply(forecast(dc.region, dirty_now(250, 4)))
    return scheduler


@pytest.mark.parametrize("path", ["full solve", "fast path"])
def test_the_submitted_preference_reaches_the_plan(path: str) -> None:
    """From the study's spec (as the recommender copies it into each JobRequested) to the plan:
    the fastest trial starts now, the greenest one is planned 4 h later, balanced waits too
    (250 g/kWh in 4 h is far above its premium)."""
    scheduler = _scheduler()
    for n, preference in enumerate((GREENEST, BALANCED, FASTEST), start=1):
        scheduler.apply(_request(n, preference))
    decision = scheduler.replan(NOW) if path == "full solve" else scheduler.place_new(NOW)
    assert decision is not None
    starts = {
        job: min(h for h, _, _ in planned.slots) for job, planned in decision.result.jobs.items()
    }
    hour = epoch_hour(NOW)
    assert starts == {job_id(1): hour + 4, job_id(2): hour + 4, job_id(3): hour}
    started = [a.job_id for a in decision.assignments if a.action is AssignmentAction.start]
    assert started == [job_id(3)]


def test_the_preference_survives_a_later_full_solve() -> None:
    """The fast path's decision is not undone by the full solve that follows."""
    scheduler = _scheduler()
    scheduler.apply(_request(1, FASTEST))
    placed = scheduler.place_new(NOW)
    assert placed is not None
    for event in placed.events():
        scheduler.apply(event)
    later = scheduler.replan(NOW + timedelta(minutes=1)).result.jobs[job_id(1)]
    assert min(h for h, _, _ in later.slots) == epoch_hour(NOW)
