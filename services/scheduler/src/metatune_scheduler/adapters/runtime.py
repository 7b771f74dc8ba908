"""The scheduler inside the event loop: fold events, coalesce re-solves, publish the changes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from metatune import subjects
from metatune.contracts import Assignment, Event, JobInfeasible, Plan

from ..domain import Decision, Scheduler

log = logging.getLogger("metatune.scheduler")
Publish = Callable[[str, Event], Awaitable[None]]


def subject_of(event: Event) -> str:
    match event:
        case Plan():
            return subjects.PLANS
        case Assignment():
            return subjects.assignments(event.datacenter)
        case JobInfeasible():
            return subjects.JOBS_INFEASIBLE
    raise TypeError(f"the scheduler does not publish {type(event).__name__}")


class Runtime:
    """One lock guards the state: events wait while a solve (in a worker thread) reads it.

    ``notify`` marks the plan stale; the loop waits ``debounce_s`` for the burst to settle,
    then solves once, so N events in a burst cost one solve, not N."""

    def __init__(self, scheduler: Scheduler, publish: Publish, now: Callable[[], datetime], debounce_s: float = 0.5) -> None:
        self.scheduler = scheduler
        self.publish = publish
        self.now = now
        self.debounce_s = debounce_s
        self.ready = asyncio.Event()  # set once the stream has been replayed
        self.solves = 0
        self._stale = asyncio.Event()
        self._lock = asyncio.Lock()

    async def fold(self, event: Event) -> None:
        await self.ready.wait()
        async with self._lock:
            if self.scheduler.apply(event):
                self._stale.set()

    def notify(self) -> None:
        self._stale.set()

    async def loop(self) -> None:
        await self.ready.wait()
        self._stale.set()  # plan once after a (re)start
        while True:
            await self._stale.wait()
            await asyncio.sleep(self.debounce_s)
            self._stale.clear()
            await self.solve_once()

    async def solve_once(self) -> Decision:
        async with self._lock:
            decision = await asyncio.to_thread(self.scheduler.replan, self.now())
            self.solves += 1
            for event in decision.events():
                await self.publish(subject_of(event), event)
                self.scheduler.apply(event)
        log.info("plan %s: %d jobs, %d changes, %.0f g vs %.0f g baseline, %.2f s",
                 decision.plan.plan_version if decision.plan else "unchanged", len(decision.result.jobs),
                 len(decision.assignments), decision.result.emissions_g, decision.result.baseline_g,
                 decision.result.solve_seconds)
        return decision
