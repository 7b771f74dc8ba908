"""The scheduler inside the event loop: fold events, coalesce re-solves, publish the changes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from metatune import subjects
from metatune.contracts import AgentStatus, Assignment, ErrorEvent, Event, JobInfeasible, Plan

from ..domain import Decision, Scheduler
from ..domain.leases import Leases

log = logging.getLogger("metatune.scheduler")
Publish = Callable[[str, Event], Awaitable[None]]
Record = Callable[[Assignment], Awaitable[None]]


def subject_of(event: Event) -> str:
    match event:
        case Plan():
            return subjects.PLANS
        case Assignment():
            return subjects.assignments(event.datacenter)
        case JobInfeasible():
            return subjects.JOBS_INFEASIBLE
        case ErrorEvent():
            return subjects.errors(event.service)
    raise TypeError(f"the scheduler does not publish {type(event).__name__}")


class Runtime:
    """One lock guards the state: events wait while a solve (in a worker thread) reads it.

    ``notify`` marks the plan stale; the loop waits ``debounce_s`` for the burst to settle,
    then solves once, so N events in a burst cost one solve, not N."""

    def __init__(
        self, scheduler: Scheduler, publish: Publish, now: Callable[[], datetime], debounce_s: float = 0.5,
        *, lease_s: float = 20.0, record: Record | None = None,
    ) -> None:
        """``lease_s``: real seconds an agent may stay silent before it is lost; ``record``: keeps
        each job's current assignment (KV) before the assignment is published."""
        self.scheduler = scheduler
        self.publish = publish
        self.now = now
        self.debounce_s = debounce_s
        self.leases = Leases(lease_s)
        self.record = record
        self.ready = asyncio.Event()  # set once the stream has been replayed
        self.solves = 0
        self._stale = asyncio.Event()
        self._lock = asyncio.Lock()

    async def fold(self, event: Event) -> None:
        await self.ready.wait()
        async with self._lock:
            if isinstance(event, AgentStatus) and self.leases.heard(event.datacenter, time.monotonic()):
                self.scheduler.agent_back(event.datacenter)
                log.warning("trainer-agent of %s is back: its capacity counts again", event.datacenter)
                self._stale.set()
            if self.scheduler.apply(event):
                self._stale.set()

    async def watch_leases(self) -> None:
        """Declare agents lost when silent past the lease (checked four times per lease)."""
        await self.ready.wait()
        async with self._lock:  # after a restart: every datacenter believed to run a job owes a heartbeat
            for job in self.scheduler.state.active_jobs():
                if job.location is not None and job.status.value == "running":
                    self.leases.expect(job.location, time.monotonic())
        while True:
            await asyncio.sleep(self.leases.lease_s / 4)
            await self.check_leases()

    async def check_leases(self) -> list[str]:
        async with self._lock:
            at = time.monotonic()
            lost = self.leases.expired(at)
            for dc in lost:
                silent = at - self.leases.last_heard[dc]
                events = self.scheduler.agent_lost(dc, self.now(), silent)
                log.warning("trainer-agent of %s silent for %.0f s: lost; %d job(s) paused at their checkpoint",
                            dc, silent, len(events) - 1)
                await self._emit(events)
            if lost:
                self._stale.set()
            for job in self.scheduler.state.active_jobs():  # a job placed where nothing was heard yet
                if job.location is not None and job.status.value == "running":
                    self.leases.expect(job.location, at)
        return lost

    async def _emit(self, events: list[Event]) -> None:
        """Publish in order and fold each, as a replay of the stream would; an assignment's KV
        record is written first, so an agent never sees an assignment newer than the record."""
        for event in events:
            if isinstance(event, Assignment) and self.record is not None:
                await self.record(event)
            await self.publish(subject_of(event), event)
            self.scheduler.apply(event)

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
            await self._emit(decision.events())
        log.info("plan %s: %d jobs, %d changes, %.0f g vs %.0f g baseline, %.2f s",
                 decision.plan.plan_version if decision.plan else "unchanged", len(decision.result.jobs),
                 len(decision.assignments), decision.result.emissions_g, decision.result.baseline_g,
                 decision.result.solve_seconds)
        return decision
