"""The fast path: a new job's first decision without a full solve, within capacity, deadline and
residency; the next full solve stays authoritative; a restart rebuilds the same plan."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from metatune.contracts import AssignmentAction, Event, Plan, PlanEntry, RegionGroup
from metatune_scheduler.domain import Scheduler
from metatune_scheduler.domain.horizon import epoch_hour
from metatune_scheduler.domain.plan_book import PlanBook, plan_events, stretches_of
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested, with_agents

HOUR0 = epoch_hour(NOW)
OSL_DEAR_NOW = [
    900,
    10,
    10,
    10,
    10,
    10,
    10,
    10,
    10,
    10,
    10,
    10,
]  # osl1: clean from the next hour on


def _scheduler(*names: str, osl=OSL_DEAR_NOW) -> Scheduler:
    scheduler = with_agents(Scheduler(small_registry(*names)))
    values = {"fra1": [300], "osl1": osl, "sjc1": [1]}
    for dc in scheduler.registry.datacenters:
        scheduler.apply(forecast(dc.region, values[dc.name]))
    return scheduler


def _publish(scheduler: Scheduler, events: list[Event], log: list[Event]) -> None:
    for event in events:
        scheduler.apply(event)
        log.append(event)


def _no_full_solve(scheduler: Scheduler) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the fast path must not solve")

    scheduler.planner.plan = refuse  # type: ignore[method-assign]


def _used(book: PlanBook, gpus: dict) -> Counter:
    """GPUs the plan uses per (datacenter, hour)."""
    used: Counter = Counter()
    for job, stretches in book.stretches.items():
        for dc, hours, _ in stretches:
            used.update({(dc, h): gpus[job] for h in hours})
    return used


def test_a_new_job_is_placed_at_once_without_a_full_solve() -> None:
    scheduler, log = _scheduler("fra1", "osl1"), []
    _publish(scheduler, [job_requested(1, hours=2, home="fra1")], log)
    _publish(scheduler, scheduler.replan(NOW).events(), log)
    _publish(
        scheduler, [job_requested(2, hours=2, home="fra1", at=NOW + timedelta(minutes=5))], log
    )

    _no_full_solve(scheduler)
    decision = scheduler.place_new(NOW + timedelta(minutes=5))

    assert decision is not None and len(decision.plans) == 1
    plan = decision.plan
    assert plan.changes_only and plan.plan_version == 1 and plan.removed_jobs == []
    assert [(e.job_id, e.datacenter) for e in plan.entries] == [
        (job_id(2), "osl1")
    ]  # only the new job, where it is cleanest
    assert scheduler.place_new(NOW + timedelta(minutes=6)) is None  # nothing new since


def test_the_fast_path_respects_capacity_deadline_and_residency() -> None:
    scheduler, log = _scheduler("fra1", "osl1", "sjc1"), []
    # osl1 (clean from the next hour) is full in hours 1-3 with job 1, which may wait two days
    _publish(
        scheduler,
        [job_requested(1, hours=3, gpus=16, deadline_h=48, group=RegionGroup.EU, home="fra1")],
        log,
    )
    _publish(scheduler, scheduler.replan(NOW).events(), log)
    assert {dc for dc, _, _ in scheduler.state.last_plan.stretches[job_id(1)]} == {"osl1"}
    hours = [
        job_requested(n, hours=3, gpus=16, deadline_h=4, group=RegionGroup.EU, home="fra1")
        for n in (2, 3)
    ]
    _publish(scheduler, hours, log)

    _no_full_solve(scheduler)
    decision = scheduler.place_new(NOW + timedelta(minutes=1))

    assert decision is not None
    _publish(scheduler, decision.events(), log)
    book = scheduler.state.last_plan
    used = _used(book, {job_id(n): 16 for n in (1, 2, 3)})
    assert max(used.values()) <= 16  # every datacenter-hour within its GPUs
    (stretch,) = book.stretches[job_id(2)]
    assert (
        stretch[0] in {"fra1", "osl1"} and max(stretch[1]) < HOUR0 + 4
    )  # EU only, by its deadline
    # job 3 has no room left by its deadline: listed, not placed; the full solve decides it
    assert job_id(3) not in book.stretches and decision.plan.infeasible_jobs == [job_id(3)]
    assert (
        decision.infeasible == []
    )  # no JobInfeasible from the fast path: that is the full solve's
    starts = {(a.job_id, a.action, a.datacenter) for a in decision.assignments}
    assert starts == {
        (job_id(2), AssignmentAction.start, "fra1")
    }  # it runs now at fra1, the only room


def test_the_next_full_solve_may_move_a_fast_placed_job() -> None:
    scheduler, log = _scheduler("fra1", "osl1"), []
    _publish(scheduler, [job_requested(1, hours=3, gpus=16, deadline_h=48, home="fra1")], log)
    _publish(scheduler, scheduler.replan(NOW).events(), log)
    _publish(scheduler, [job_requested(2, hours=3, gpus=16, deadline_h=5, home="fra1")], log)
    fast = scheduler.place_new(NOW)
    assert fast is not None
    _publish(scheduler, fast.events(), log)
    assert [dc for dc, _, _ in scheduler.state.last_plan.stretches[job_id(2)]] == [
        "fra1"
    ]  # osl1 1-3 is job 1's

    full = scheduler.replan(
        NOW + timedelta(minutes=2)
    )  # job 1 can wait; job 2 takes osl1's clean hours
    _publish(scheduler, full.events(), log)
    stretches = scheduler.state.last_plan.stretches
    # its first hour at fra1 was started (committed); the rest moves to osl1's clean hours
    assert next((dc, hours[0]) for dc, hours, _ in stretches[job_id(2)]) == ("fra1", HOUR0)
    assert [dc for dc, _, _ in stretches[job_id(2)]] == ["fra1", "osl1"]
    assert [dc for dc, _, _ in stretches[job_id(1)]] == [
        "osl1"
    ]  # job 1 made room: some of its hours go later
    assert stretches[job_id(1)][0][1] != (HOUR0 + 1, HOUR0 + 2, HOUR0 + 3)
    assert max(_used(scheduler.state.last_plan, {job_id(1): 16, job_id(2): 16}).values()) <= 16
    assert {e.job_id for e in full.plan.entries} == {job_id(1), job_id(2)}  # the changes only

    restarted = _scheduler("fra1", "osl1")  # what the stream holds, replayed
    for event in log:
        restarted.apply(event)
    assert restarted.state.last_plan.stretches == scheduler.state.last_plan.stretches
    assert restarted.state.last_plan.plan_version == scheduler.state.last_plan.plan_version
    again = restarted.replan(NOW + timedelta(minutes=3))
    assert (
        again.plan is None
        and again.assignments == []
        and restarted.place_new(NOW + timedelta(minutes=3)) is None
    )


def test_a_job_requested_during_a_full_solve_is_placed_when_it_concludes() -> None:
    scheduler, log = _scheduler("fra1", "osl1"), []
    _publish(scheduler, [job_requested(1, hours=2, home="fra1")], log)
    solve = scheduler.prepare(NOW)
    _publish(
        scheduler, [job_requested(2, hours=2, home="fra1")], log
    )  # while the solver runs, without the lock
    decision = scheduler.conclude(solve, scheduler.solve(solve), NOW)
    assert {e.job_id for e in decision.plan.entries} == {job_id(1), job_id(2)}


def test_a_whole_plan_event_from_before_still_folds() -> None:
    """Plans published before ``changes_only`` existed carry every job: folding one resets the book."""
    book = PlanBook.of(
        Plan(
            occurred_at=NOW,
            plan_version=3,
            horizon_start=NOW,
            expected_emissions_g=1.0,
            baseline_emissions_g=2.0,
            solve_seconds=0.1,
            entries=[PlanEntry(job_id=job_id(1), datacenter="fra1", hours=[NOW], emissions_g=1.0)],
        )
    )
    book.fold(
        Plan(
            occurred_at=NOW,
            plan_version=4,
            horizon_start=NOW,
            expected_emissions_g=1.0,
            baseline_emissions_g=2.0,
            solve_seconds=0.1,
            entries=[PlanEntry(job_id=job_id(2), datacenter="osl1", hours=[NOW], emissions_g=1.0)],
        )
    )
    assert set(book.stretches) == {job_id(2)} and book.plan_version == 4


@pytest.mark.parametrize("jobs", [3, 400])
def test_plan_events_stay_under_the_payload_limit_and_fold_back(jobs: int) -> None:
    scheduler = _scheduler("fra1", "osl1", osl=[10])
    for n in range(jobs):
        scheduler.apply(job_requested(n, hours=1 + n % 3, deadline_h=24 + n % 48, home="fra1"))
    result = scheduler.replan(NOW).result
    limit = 8_000
    events = plan_events(result, None, 0, NOW, part_bytes=limit)
    assert all(len(event.to_bytes()) <= limit for event in events)
    assert [event.part for event in events] == list(range(len(events))) and {
        e.parts for e in events
    } == {len(events)}
    assert len({event.event_id for event in events}) == len(events)
    book = PlanBook(0, NOW)
    for event in reversed(events):  # parts fold in any order
        book.fold(event)
    assert book.stretches.keys() == result.jobs.keys()
    assert all(
        [(dc, hours) for dc, hours, _ in book.stretches[job]]
        == [(dc, hours) for dc, hours, _ in stretches_of(planned)]
        for job, planned in result.jobs.items()
    )


async def test_the_runtime_publishes_a_new_job_s_first_decision_without_a_solve() -> None:
    """Through the runtime: the request folds, the fast path publishes, no full solve ran."""
    from metatune_scheduler.adapters.runtime import Runtime

    scheduler, published = _scheduler("fra1", "osl1"), []

    async def publish(subject: str, event: Event) -> None:
        published.append((subject, event))

    runtime = Runtime(scheduler, publish, lambda: NOW, debounce_s=3600)
    runtime.ready.set()
    await runtime.fold(job_requested(1, hours=2, home="fra1"))
    decision = await runtime.place_new()

    assert runtime.solves == 0 and runtime.placements == 1 and decision is not None
    plans = [event for subject, event in published if isinstance(event, Plan)]
    assert [entry.job_id for plan in plans for entry in plan.entries] == [job_id(1)]
    assert (
        scheduler.state.last_plan is not None and job_id(1) in scheduler.state.last_plan.stretches
    )


def test_after_the_hour_turns_the_fast_path_places_from_now_and_leaves_the_commit_to_a_full_solve() -> (
    None
):
    scheduler, log = _scheduler("fra1", "osl1", osl=[10]), []
    _publish(scheduler, [job_requested(1, hours=2, home="fra1")], log)
    _publish(scheduler, scheduler.replan(NOW).events(), log)
    later = NOW + timedelta(hours=1, minutes=10)
    _publish(scheduler, [job_requested(2, hours=2, deadline_h=30, home="fra1", at=later)], log)

    decision = scheduler.place_new(later)

    assert (
        decision is not None and decision.plan.horizon_start == NOW
    )  # still the last full solve's hour
    _publish(scheduler, decision.events(), log)
    (stretch,) = scheduler.state.last_plan.stretches[job_id(2)]
    assert min(stretch[1]) >= HOUR0 + 1  # nothing in the past
    full = scheduler.replan(later)  # the first plan of the new hour is a full solve's
    assert full.plan is not None and full.plan.horizon_start == NOW + timedelta(hours=1)
