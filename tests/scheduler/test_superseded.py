"""A full solve runs off the event loop while events keep folding: its result is applied only if
the datacenters it planned on still hold (capacity, forecast); a superseded result changes
nothing, and the jobs requested meanwhile are still planned, once each."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from uuid import uuid4

from metatune.contracts import Assignment, CarbonForecast, Event, Plan
from metatune_scheduler.adapters.runtime import Runtime
from metatune_scheduler.domain import Scheduler
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested, with_agents

CLEAN, DIRTY = [10], [900]


def _scheduler() -> Scheduler:
    """fra1 at 300 g/kWh, osl1 at 10: a job goes to osl1 while osl1 has GPUs and that forecast."""
    scheduler = with_agents(Scheduler(small_registry("fra1", "osl1")))
    values = {"fra1": [300], "osl1": CLEAN}
    for dc in scheduler.registry.datacenters:
        scheduler.apply(forecast(dc.region, values[dc.name]))
    return scheduler


def _region(scheduler: Scheduler, name: str) -> str:
    return next(dc.region for dc in scheduler.registry.datacenters if dc.name == name)


def _reissued(scheduler: Scheduler, name: str, values: list[int]) -> CarbonForecast:
    """A new issue of the forecast of ``name``'s grid, a minute after the first."""
    issued = forecast(_region(scheduler, name), values)
    return issued.model_copy(update={"event_id": uuid4(), "issued_at": NOW + timedelta(minutes=1)})


def _fold(scheduler: Scheduler, events: list[Event]) -> None:
    for event in events:
        scheduler.apply(event)


def _sites(scheduler: Scheduler) -> dict:
    book = scheduler.state.last_plan
    assert book is not None
    return {job: {dc for dc, _, _ in stretches} for job, stretches in book.stretches.items()}


def test_a_result_planned_on_an_agent_lost_during_the_solve_is_not_applied() -> None:
    scheduler = _scheduler()
    scheduler.apply(job_requested(1, hours=2, home="fra1"))
    solve = scheduler.prepare(NOW)
    # while the solver runs: osl1's agent is lost, and a second job is requested
    _fold(scheduler, scheduler.agent_lost("osl1", NOW, 30.0))
    scheduler.apply(job_requested(2, hours=2, home="fra1"))
    result = scheduler.solve(solve)
    assert {dc for _, dc, _ in result.jobs[job_id(1)].slots} == {"osl1"}  # planned on osl1's GPUs

    decision = scheduler.conclude(solve, result, NOW)

    assert decision.superseded and decision.events() == []
    assert scheduler.state.last_plan is None  # nothing applied
    # both jobs, never placed (the second requested meanwhile), get their first decision from the
    # fast path; the next solve plans every job, each once, on the datacenter that is left
    placed = scheduler.place_new(NOW)
    assert placed is not None and placed.plan is not None
    assert {e.job_id for e in placed.plan.entries} == {job_id(1), job_id(2)}
    _fold(scheduler, placed.events())
    again = scheduler.replan(NOW)
    assert not again.superseded
    _fold(scheduler, again.events())
    assert _sites(scheduler) == {job_id(1): {"fra1"}, job_id(2): {"fra1"}}
    starts = Counter(
        e.job_id for e in [*placed.events(), *again.events()] if isinstance(e, Assignment)
    )
    assert all(count == 1 for count in starts.values())


def test_a_result_priced_by_a_forecast_replaced_during_the_solve_is_not_applied() -> None:
    scheduler = _scheduler()
    scheduler.apply(job_requested(1, hours=2, home="fra1"))
    solve = scheduler.prepare(NOW)
    scheduler.apply(_reissued(scheduler, "osl1", DIRTY))
    assert not scheduler.current(solve)

    decision = scheduler.conclude(solve, scheduler.solve(solve), NOW)

    assert decision.superseded and scheduler.state.last_plan is None
    _fold(scheduler, scheduler.replan(NOW).events())
    assert _sites(scheduler) == {job_id(1): {"fra1"}}


def test_a_heartbeat_that_changes_nothing_leaves_the_result_current() -> None:
    scheduler = _scheduler()
    scheduler.apply(job_requested(1, hours=2, home="fra1"))
    solve = scheduler.prepare(NOW)
    with_agents(scheduler)  # every agent heard again, the same GPUs
    scheduler.apply(_reissued(scheduler, "osl1", CLEAN))  # issued again, the same values

    decision = scheduler.conclude(solve, scheduler.solve(solve), NOW)

    assert not decision.superseded and decision.plan is not None
    assert {e.job_id for e in decision.plan.entries} == {job_id(1)}


async def test_the_runtime_folds_events_while_a_solve_runs_and_drops_its_stale_result() -> None:
    """Through the runtime (its worker thread): the solve starts; while it runs a request and a
    new forecast fold (the lock is free); its stale result publishes nothing; the fast path
    places both jobs; the next solve plans both, each once."""
    scheduler, published = _scheduler(), []

    async def publish(subject: str, event: Event) -> None:
        published.append(event)

    runtime = Runtime(scheduler, publish, lambda: NOW, debounce_s=3600)
    runtime.ready.set()
    await runtime.fold(job_requested(1, hours=2, home="fra1"))
    solving = asyncio.create_task(runtime.solve_once())
    await asyncio.sleep(0)  # the task has read the state and waits on the solver
    assert not runtime._lock.locked()
    await runtime.fold(job_requested(2, hours=2, home="fra1"))
    await runtime.fold(_reissued(scheduler, "osl1", DIRTY))

    stale = await solving

    assert stale.superseded and published == []
    assert runtime.solves == 0 and runtime.superseded == 1
    await runtime.place_new()
    first = [entry.job_id for e in published if isinstance(e, Plan) for entry in e.entries]
    assert sorted(first) == sorted([job_id(1), job_id(2)])
    fresh = await runtime.solve_once()
    assert not fresh.superseded and runtime.solves == 1
    assert _sites(scheduler) == {job_id(1): {"fra1"}, job_id(2): {"fra1"}}
    starts = Counter(e.job_id for e in published if isinstance(e, Assignment))
    assert set(starts) == {job_id(1), job_id(2)} and set(starts.values()) == {1}
