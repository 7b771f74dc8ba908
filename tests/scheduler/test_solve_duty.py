"""What a full solve costs the event loop delays every arrival behind it: while only new jobs make
the plan stale (the fast path has placed them), the next full solve waits until the loop has spent
no more than ``solve_duty`` of its time on full solves; anything else that makes it stale (here a
new forecast) solves after the debounce alone."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from uuid import uuid4

import pytest

from metatune.contracts import CarbonForecast, Event
from metatune_scheduler.adapters.runtime import Runtime
from metatune_scheduler.domain import Scheduler
from metatune_scheduler.settings import SchedulerSettings
from tests.support.builders import small_registry
from tests.support.waiting import wait_for

from .conftest import NOW, forecast, job_requested, with_agents

# Long enough, against a debounce of 10 ms, to show that a solve does not come (no bound is timed).
AFTER_MANY_DEBOUNCES_S = 0.5


def _scheduler() -> Scheduler:
    scheduler = with_agents(Scheduler(small_registry("fra1", "osl1")))
    for dc in scheduler.registry.datacenters:
        scheduler.apply(forecast(dc.region, [100]))
    return scheduler


def _reissued(scheduler: Scheduler) -> CarbonForecast:
    region = scheduler.registry.datacenters[0].region
    issued = forecast(region, [120])
    return issued.model_copy(update={"event_id": uuid4(), "issued_at": NOW + timedelta(minutes=1)})


async def _running(duty: float) -> tuple[Runtime, asyncio.Task[None]]:
    """A runtime with its loop running, after the plan it makes once at start."""
    scheduler, published = _scheduler(), []

    async def publish(subject: str, event: Event) -> None:
        published.append(event)

    runtime = Runtime(
        scheduler, publish, lambda: NOW, debounce_s=0.01, fast_s=0.01, solve_duty=duty
    )
    runtime.ready.set()
    loop = asyncio.create_task(runtime.loop())
    await wait_for(lambda: runtime.solves == 1, "the plan once after a start")
    return runtime, loop


async def test_new_jobs_alone_wait_out_the_duty_and_a_new_forecast_does_not() -> None:
    # a duty so small that the quiet after a solve outlasts the test
    runtime, loop = await _running(duty=1e-9)
    try:
        await runtime.fold(job_requested(1, hours=2, home="fra1"))
        await wait_for(lambda: runtime.placements == 1, "the fast path's answer")
        await asyncio.sleep(AFTER_MANY_DEBOUNCES_S)
        assert runtime.solves == 1  # the fast path placed it; its full solve waits
        await runtime.fold(_reissued(runtime.scheduler))
        await wait_for(lambda: runtime.solves == 2, "the solve a new forecast asks for")
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_without_a_duty_new_jobs_are_solved_after_the_debounce() -> None:
    runtime, loop = await _running(duty=1.0)
    try:
        await runtime.fold(job_requested(1, hours=2, home="fra1"))
        await wait_for(lambda: runtime.solves == 2, "the solve the new job asks for")
        assert runtime.placements == 1
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


@pytest.mark.parametrize("duty", [0.0, -0.1, 1.5])
def test_a_duty_outside_0_to_1_is_refused(duty: float) -> None:
    with pytest.raises(ValueError, match="solve_duty"):
        Runtime(_scheduler(), lambda s, e: asyncio.sleep(0), lambda: NOW, solve_duty=duty)
    with pytest.raises(ValueError, match="scheduler_solve_duty"):
        SchedulerSettings(scheduler_solve_duty=duty)
