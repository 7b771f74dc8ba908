"""Anticipated jobs hold room where that pays, are never published, and never cost a requested job."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from uuid import uuid4

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metatune.contracts import Assignment, AssignmentAction, FailureReason, RunFailed
from metatune.registry import Registry
from metatune_scheduler.domain import (
    Aggregation,
    HighsModelSolver,
    Instance,
    Periods,
    Planner,
    Scheduler,
    SiteSnapshot,
    SolveLimits,
)
from metatune_scheduler.domain.anticipation import Request, anticipated_jobs, history_hours
from metatune_scheduler.domain.planner import JobSnapshot
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested, with_agents
from .random_plans import FIRST_HOUR, check_plan, scenarios


def _job(n: int, need: int, deadline: int, gpus: int = 1, **extra) -> JobSnapshot:
    return JobSnapshot(
        job_id=job_id(n),
        need_hours=need,
        gpus=gpus,
        power_kw=1.0,
        deadline_hour=FIRST_HOUR + deadline,
        allowed=frozenset({"clean", "dirty"}),
        home="dirty",
        **extra,
    )


def _sites() -> list[SiteSnapshot]:
    clean = np.full(168, 10.0)
    clean[0] = 20.0  # the clean site is a little dirtier now than in the next hours
    return [
        SiteSnapshot("clean", 1.0, 1, clean),
        SiteSnapshot("dirty", 1.0, 8, np.full(168, 400.0)),
    ]


def _planner() -> Planner:
    return Planner(HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0)))


def test_the_last_days_requests_are_expected_again_a_day_later() -> None:
    requests = [
        Request(FIRST_HOUR - 30, _job(1, 2, 10)),
        Request(FIRST_HOUR - 5, _job(2, 3, 20)),
        Request(FIRST_HOUR, _job(3, 1, 4)),
    ]
    expected = anticipated_jobs(requests, FIRST_HOUR, lookahead_h=24)
    assert [job.need_hours for job in expected] == [3, 1]  # 30 h ago is more than a day back
    assert [job.not_before_hour for job in expected] == [FIRST_HOUR + 19, FIRST_HOUR + 24]
    assert [job.deadline_hour for job in expected] == [FIRST_HOUR + 44, FIRST_HOUR + 28]
    assert all(job.anticipated and job.location is None for job in expected)
    assert expected == anticipated_jobs(
        requests, FIRST_HOUR, lookahead_h=24
    )  # same ids: a restart agrees
    assert {job.job_id for job in expected}.isdisjoint({request.job.job_id for request in requests})
    assert [job.need_hours for job in anticipated_jobs(requests, FIRST_HOUR, lookahead_h=20)] == [3]
    assert anticipated_jobs(requests, FIRST_HOUR, lookahead_h=0) == []


def test_demand_is_expected_from_the_most_recent_days_observed_for_each_hour() -> None:
    """A request 5 h ago: with three days ahead and one day of history it is expected again in
    19, 43 and 67 h (tomorrow, and the days after, look like today). With three days of history
    and one day ahead, requests made 5, 29 and 53 h ago each count a third in 19 h; one made 77 h
    ago is older than the three days that hour has seen. A log that began 30 h ago has seen two of
    those days, so each counts a half."""

    def request(back_h: int, n: int) -> Request:
        return Request(FIRST_HOUR - back_h, _job(n, 2, 10 - back_h))

    repeated = anticipated_jobs([request(5, 1)], FIRST_HOUR, lookahead_h=72, history_days=1)
    assert [job.not_before_hour - FIRST_HOUR for job in repeated] == [19, 43, 67]
    assert [job.deadline_hour - FIRST_HOUR for job in repeated] == [29, 53, 77]
    assert {job.weight for job in repeated} == {1.0} and len({job.job_id for job in repeated}) == 3
    averaged = anticipated_jobs(
        [request(back, n) for n, back in enumerate((5, 29, 53, 77))],
        FIRST_HOUR,
        lookahead_h=24,
        history_days=3,
    )
    assert [job.not_before_hour - FIRST_HOUR for job in averaged] == [19, 19, 19]
    assert [job.weight for job in averaged] == [1 / 3] * 3
    young = anticipated_jobs(
        [request(5, 1), request(29, 2)],
        FIRST_HOUR,
        lookahead_h=24,
        history_days=3,
        observed_since=FIRST_HOUR - 30,
    )  # two of the three days recorded: halves
    assert [job.weight for job in young] == [1 / 2] * 2
    assert history_hours(24, 3) == 72 and history_hours(72, 1) == 72 and history_hours(25, 2) == 72
    with pytest.raises(ValueError):
        anticipated_jobs([], FIRST_HOUR, lookahead_h=73)


def test_an_expected_share_of_a_job_takes_that_share_of_gpus_and_power() -> None:
    share = dataclasses.replace(_job(1, 2, 10, gpus=6, anticipated=True), weight=0.5)
    instance = _planner().instance(FIRST_HOUR, [share, _job(2, 1, 4, gpus=6)], _sites())
    assert sorted(zip(instance.gpus.tolist(), instance.power_kw.tolist(), strict=True)) == [
        (3.0, 0.5),
        (6.0, 1.0),
    ]


def test_expected_work_makes_a_flexible_job_run_now() -> None:
    """One GPU at the clean site. Alone, the flexible job waits for the cleaner next hour; with
    a job expected then for two hours (it must run hours 1-2), running now is cheaper in total:
    +10 g now against 2 x 390 g the expected job would pay at the dirty site."""
    flexible = _job(1, 1, 3)
    expected = _job(2, 2, 3, not_before_hour=FIRST_HOUR + 1, anticipated=True)
    alone = _planner().plan(FIRST_HOUR, [flexible], _sites())
    assert alone.jobs[flexible.job_id].slots[0][:2] == (FIRST_HOUR + 1, "clean")
    planned = _planner().plan(FIRST_HOUR, [flexible, expected], _sites())
    assert planned.jobs[flexible.job_id].slots[0][:2] == (FIRST_HOUR, "clean")
    assert set(planned.jobs) == {flexible.job_id}  # never published
    assert planned.baseline_g == alone.baseline_g == 400.0
    assert planned.emissions_g == 20.0


def test_an_expected_job_gives_way_and_is_never_reported() -> None:
    """One GPU and two jobs that need it for the same two hours: the requested job gets it and
    the expected one is dropped without an infeasibility notice; one too large for every site
    is dropped too."""
    requested = _job(1, 2, 2)
    expected = _job(2, 2, 2, anticipated=True)
    huge = _job(3, 1, 5, gpus=64, anticipated=True)
    sites = [SiteSnapshot("clean", 1.0, 1, np.full(168, 10.0))]
    planned = _planner().plan(FIRST_HOUR, [expected, huge, requested], sites)
    assert planned.infeasible == []
    assert set(planned.jobs) == {requested.job_id}
    assert [h for h, _, _ in planned.jobs[requested.job_id].slots] == [FIRST_HOUR, FIRST_HOUR + 1]


@settings(max_examples=25, deadline=None)
@given(scenarios(), st.integers(0, 2**16))
def test_expected_jobs_never_cost_a_requested_job_its_deadline(scenario, seed) -> None:
    jobs, sites, aggregation = scenario
    rng = np.random.default_rng(seed)
    expected = [
        JobSnapshot(
            job_id=job_id(100 + k),
            need_hours=int(rng.integers(1, 8)),
            gpus=int(rng.integers(1, 9)),
            power_kw=1.0,
            deadline_hour=FIRST_HOUR + int(rng.integers(8, 40)),
            allowed=frozenset(site.name for site in sites),
            home=sites[0].name,
            not_before_hour=FIRST_HOUR + int(rng.integers(1, 8)),
            anticipated=True,
        )
        for k in range(int(rng.integers(1, 6)))
    ]
    planner = _planner()
    without = planner.plan(FIRST_HOUR, jobs, sites)
    planned = planner.plan(FIRST_HOUR, jobs + expected, sites)
    check_plan(planned, jobs, sites, aggregation.none(aggregation.horizon))
    assert set(planned.jobs) <= {job.job_id for job in jobs}
    assert {item.job_id for item in planned.infeasible} == {
        item.job_id for item in without.infeasible
    }


def _first_planned_hour(later, **options) -> tuple[str, object]:
    """A 2 h job on one GPU was requested at NOW + 1 h and had to run at once; at ``later`` a 1 h
    job arrives with Oslo (one GPU) a little dirtier now than in the next hour. Where and when the
    scheduler, built with ``options``, plans it (it never publishes the expected job)."""
    registry = Registry(
        datacenters=[
            dc.model_copy(update={"gpus": 1}) if dc.name == "osl1" else dc
            for dc in small_registry("fra1", "osl1").datacenters
        ]
    )
    events = [
        job_requested(1, hours=2, deadline_h=2, at=NOW + timedelta(hours=1)),
        Assignment(  # it ran at osl1: a run event counts only from its job's datacenter
            occurred_at=NOW + timedelta(hours=1),
            job_id=job_id(1),
            study_id=uuid4(),
            datacenter="osl1",
            action=AssignmentAction.start,
            plan_version=1,
        ),
        RunFailed(
            event_id=uuid4(),
            occurred_at=NOW + timedelta(hours=3),
            job_id=job_id(1),
            datacenter="osl1",
            reason=FailureReason.stopped,
            message="stopped",
        ),
        forecast("NO", [20.0] + [10.0] * 167, later),
        forecast("DE", [400.0], later),
        job_requested(2, hours=1, deadline_h=3, at=later),
    ]
    sched = with_agents(Scheduler(registry, _planner(), **options))
    for event in events:
        sched.apply(event)
    (entry,) = sched.replan(later).plan.entries
    assert entry.job_id == job_id(2)
    return entry.datacenter, entry.hours[0]


def test_the_scheduler_expects_yesterdays_requests_again() -> None:
    """Expecting yesterday's job again, the scheduler runs today's job now instead of in the
    cleaner next hour."""
    later = NOW + timedelta(hours=24)
    assert _first_planned_hour(later, anticipate_h=0) == ("osl1", later + timedelta(hours=1))
    assert _first_planned_hour(later, anticipate_h=24) == ("osl1", later)


def test_an_expected_hour_is_priced_at_a_quantile_of_its_usable_hours() -> None:
    """Leaving an expected hour unplaced costs the chosen quantile of the hours it could use
    (its dearest at 1.0), while a requested hour stays dearer than any placement."""
    periods = Periods.build(0, Aggregation.none(horizon=4))
    usable = np.ones((2, 2, 4), dtype=np.int64)
    usable[1, 1] = 0  # the expected job may only use datacenter 0
    instance = Instance(
        periods=periods,
        need=np.array([1, 1]),
        gpus=np.array([1, 1]),
        power_kw=np.array([1.0, 2.0]),
        pue=np.array([1.0, 1.0]),
        intensity=np.array([[10.0, 20.0, 30.0, 40.0], [500.0] * 4]),
        capacity=np.ones((2, 4)),
        usable=usable,
        switch_g=np.zeros((2, 2)),
        optional=np.array([False, True]),
    )
    assert instance.unmet_penalty()[1] == 50.0  # the default, the median: 2 kW x 25 g/kWh
    dearest = dataclasses.replace(instance, optional_quantile=1.0)
    assert dearest.unmet_penalty()[1] == 80.0  # 2 kW x 40 g/kWh
    median = instance
    assert median.unmet_penalty()[0] > 500.0
    assert list(median.integral()) == [True, False]  # the expected job is fluid


def test_the_scheduler_reads_requests_as_far_back_as_its_days_of_history() -> None:
    """The same job, requested two days ago: with two days of history it counts half a job (half a
    GPU for 2 h at the dirty site would cost 390 g, more than the 10 g of running now), so today's
    job runs now; with one day of history nothing is expected and it waits."""
    later = NOW + timedelta(hours=48)
    assert _first_planned_hour(later, anticipate_h=24, anticipation_days=1) == (
        "osl1",
        later + timedelta(hours=1),
    )
    assert _first_planned_hour(later, anticipate_h=24, anticipation_days=2) == ("osl1", later)
