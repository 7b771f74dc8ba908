"""The scheduler inside the event loop: fold events, coalesce re-solves, publish the changes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from datetime import datetime

from metatune import subjects
from metatune.contracts import (
    AgentStatus,
    Assignment,
    ErrorEvent,
    Event,
    JobInfeasible,
    JobRequested,
    Plan,
)
from metatune.provenance import ForeignRunEvent

from ..domain import Decision, PlanResult, Scheduler
from ..domain.leases import Leases
from ..domain.scheduler import Solve, full_solve

log = logging.getLogger("metatune.scheduler")
Publish = Callable[[str, Event], Awaitable[None]]
SOLVER_NICENESS = (
    5  # the solver process yields the CPU to the event loop: new jobs' latency comes first
)
Record = Callable[[Assignment], Awaitable[None]]
Reach = Callable[[float], Awaitable[bool]]  # answered within that many seconds?


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
    """One lock guards the state; a full solve holds it only to read the state and to publish
    its outcome, and runs in a solver process (or a worker thread: HiGHS releases the GIL while it
    solves) without it, so events keep folding meanwhile. A result that events have superseded
    while it ran (capacity or a forecast changed: :meth:`.Scheduler.current`) is dropped, and the
    next solve, which those events asked for, plans every job.

    ``notify`` marks the plan stale; the loop waits ``debounce_s`` for the burst to settle,
    then solves once, so N events in a burst cost one solve, not N. New jobs do not wait for
    it: ``fast_s`` after a request, the fast path places every new job into the room the
    current plan leaves and publishes that as their first decision.

    What a full solve costs the event loop (reading the state, concluding, publishing: O(jobs),
    a third of a second at 10,000) delays every arrival behind it. When only new jobs ask for
    the next one (the fast path has placed them), it waits until the loop has spent no more than
    ``solve_duty`` of its time on full solves; anything else that makes the plan stale (a run
    event, a cancellation, capacity, a forecast, a lost agent) solves after the debounce alone."""

    def __init__(
        self,
        scheduler: Scheduler,
        publish: Publish,
        now: Callable[[], datetime],
        debounce_s: float = 0.5,
        *,
        lease_s: float = 20.0,
        record: Record | None = None,
        fast_s: float | None = 0.05,
        solve_in_process: bool = False,
        reach: Reach | None = None,
        solve_duty: float = 1.0,
    ) -> None:
        """``lease_s``: real seconds an agent may stay silent before it is lost; ``reach``: the
        scheduler's own round trip through the bus within a timeout (None: the bus is always
        heard; see :meth:`check_leases`); ``record``: keeps
        each job's current assignment (KV) before the assignment is published; ``fast_s``: how
        long the fast path gathers new requests (None: no fast path, new jobs wait for a solve);
        ``solve_in_process``: the loop's full solves run in a solver process of their own, so
        that their CPU time (seconds with thousands of jobs) and the GIL do not slow the fast path;
        ``solve_duty``: the largest share of the loop's time full solves asked for by new jobs
        alone may take (1: no limit)."""
        if not 0 < solve_duty <= 1:
            raise ValueError(f"solve_duty must be in (0, 1], not {solve_duty}")
        self.scheduler = scheduler
        self.publish = publish
        self.now = now
        self.debounce_s = debounce_s
        self.fast_s = fast_s
        self.solve_in_process = solve_in_process
        self._executor: Executor | None = None  # None: a worker thread
        self.leases = Leases(lease_s)
        self.reach = reach
        self.record = record
        self.ready = asyncio.Event()  # set once the stream has been replayed
        self.solves = 0  # full solves applied
        self.superseded = 0  # full solves whose result was stale when they ended: not applied
        self.placements = 0  # fast-path decisions published
        self.solve_duty = solve_duty
        self._stale = asyncio.Event()
        self._urgent = asyncio.Event()  # stale for more than new jobs the fast path places
        self._quiet_until = 0.0  # monotonic: before it, new jobs alone start no full solve
        self._fresh = asyncio.Event()  # a job was requested since the last fast path
        self._lock = asyncio.Lock()

    async def fold(self, event: Event) -> ForeignRunEvent | None:
        """Fold ``event``; a run event from elsewhere than its job's datacenter is refused instead
        (returned, for the caller to report), and changes nothing."""
        await self.ready.wait()
        async with self._lock:
            state = self.scheduler.state
            refusal = None if state.seen(event.event_id) else state.foreign(event)
            if refusal is not None:
                return refusal
            if isinstance(event, AgentStatus) and self.leases.heard(
                event.datacenter, time.monotonic()
            ):
                self.scheduler.agent_back(event.datacenter)
                log.warning(
                    "trainer-agent of %s is back: its capacity counts again", event.datacenter
                )
                self.notify()
            if self.scheduler.apply(event):
                if isinstance(event, JobRequested) and self.fast_s is not None:
                    self._stale.set()  # the fast path places it; the next full solve may wait
                    self._fresh.set()
                else:
                    self.notify()
        return None

    async def watch_leases(self) -> None:
        """Declare agents lost when silent past the lease (checked four times per lease)."""
        await self.ready.wait()
        async with self._lock:
            self._expect_running(time.monotonic())
        while True:
            await asyncio.sleep(self.leases.lease_s / 4)
            await self.check_leases()

    async def check_leases(self) -> list[str]:
        """Declare the agents silent past their lease lost, counting their silence only while the
        scheduler itself hears the bus: each check first makes its own round trip through the
        server (``reach``). While that goes unanswered (a frozen server, whose connection may not
        drop for minutes, or a lost link) no lease runs out; once it is answered again every agent
        gets a full lease to be heard. A lease is judged as of the moment the bus answered."""
        at = await self._hear_bus()
        lost: list[str] = []
        async with self._lock:
            if at is not None:
                lost = self.leases.expired(at)
                for dc in lost:
                    silent = at - self.leases.last_heard[dc]
                    events = self.scheduler.agent_lost(dc, self.now(), silent)
                    log.warning(
                        "trainer-agent of %s silent for %.0f s: lost; %d job(s) paused at their checkpoint",
                        dc,
                        silent,
                        len(events) - 1,
                    )
                    await self._emit(events)
            if lost:
                self.notify()
            self._expect_running(time.monotonic())
        return lost

    async def _hear_bus(self) -> float | None:
        """When the bus answered the scheduler's own round trip (None: it did not, in a quarter
        lease); a change of answer holds or restarts the leases as a dropped or restored
        connection does."""
        if self.reach is not None and not await self.reach(self.leases.lease_s / 4):
            if self.leases.connected:
                await self.bus_down()
            return None
        at = time.monotonic()
        if not self.leases.connected:
            await self.bus_up()
        return at

    def _expect_running(self, at: float) -> None:
        """Every datacenter believed to run a job owes a heartbeat within a lease from ``at`` if
        nothing was heard from it yet (after a restart); meanwhile its jobs keep their room."""
        for job in self.scheduler.state.active_jobs():
            if job.location is not None and job.status.value == "running":
                self.leases.expect(job.location, at)
                self.scheduler.agent_expected(job.location)

    async def bus_down(self) -> None:
        """The scheduler's own connection to NATS dropped, or the server stopped answering it:
        silence says nothing about the agents now, so no lease runs out until it is back."""
        self.leases.disconnected()
        log.warning("scheduler cut off from NATS: agent leases held until it hears it again")

    async def bus_up(self) -> None:
        """Heard again: every agent gets one full lease to be heard too."""
        self.leases.reconnected(time.monotonic())
        log.warning(
            "scheduler back on NATS: every agent has %.0f s to be heard", self.leases.lease_s
        )

    async def _emit(self, events: list[Event]) -> None:
        """Publish in order and fold each, as a replay of the stream would; an assignment's KV
        record is written first, so an agent never sees an assignment newer than the record."""
        for event in events:
            if isinstance(event, Assignment) and self.record is not None:
                await self.record(event)
            await self.publish(subject_of(event), event)
            self.scheduler.apply(event)

    def notify(self) -> None:
        """The plan is stale for more than new jobs: the next full solve waits for the debounce only."""
        self._stale.set()
        self._urgent.set()

    async def loop(self) -> None:
        await self.ready.wait()
        async with self._lock:  # before the first plan: running jobs keep their datacenter's room
            self._expect_running(time.monotonic())
        self.notify()  # plan once after a (re)start
        if self.solve_in_process:
            self._executor = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=os.nice,
                initargs=(SOLVER_NICENESS,),
            )
        try:
            async with asyncio.TaskGroup() as tasks:
                if self.fast_s is not None:
                    tasks.create_task(self._fast_loop())
                while True:
                    await self._stale.wait()
                    await asyncio.sleep(self.debounce_s)
                    await self._quiet()
                    self._stale.clear()
                    self._urgent.clear()
                    await self.solve_once()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = None

    async def _quiet(self) -> None:
        """Wait out the solve duty when only new jobs asked for the solve (or until more does)."""
        left = self._quiet_until - time.monotonic()
        if left > 0 and not self._urgent.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._urgent.wait(), left)

    async def _fast_loop(self) -> None:
        while True:
            await self._fresh.wait()
            await asyncio.sleep(self.fast_s or 0)
            self._fresh.clear()
            await self.place_new()

    async def place_new(self) -> Decision | None:
        """The fast path once: new jobs placed into the current plan's room, published."""
        async with self._lock:
            decision = self.scheduler.place_new(self.now())
            if decision is not None:
                self.placements += 1
                await self._emit(decision.events())
        return decision

    async def solve_once(self) -> Decision:
        began = time.monotonic()
        async with self._lock:
            solve = self.scheduler.prepare(self.now())
        on_loop = time.monotonic() - began
        result = await asyncio.get_running_loop().run_in_executor(
            self._executor, full_solve, self.scheduler.planner, solve
        )
        concluding = time.monotonic()
        try:
            return await self._conclude(solve, result)
        finally:
            on_loop += time.monotonic() - concluding
            # the loop's time in this solve, spread so that it is solve_duty of the time until the next
            self._quiet_until = time.monotonic() + on_loop * (1 / self.solve_duty - 1)

    async def _conclude(self, solve: Solve, result: PlanResult) -> Decision:
        async with self._lock:
            decision = self.scheduler.conclude(solve, result, self.now())
            if decision.superseded:
                self.superseded += 1
                self.notify()  # already so by the event that superseded it; never lost
                log.info("full solve superseded while it ran (capacity or forecast changed)")
                return decision
            self.solves += 1
            await self._emit(decision.events())
        log.info(
            "plan %s: %d jobs, %d changes, %.0f g vs %.0f g baseline, %.2f s",
            decision.plan.plan_version if decision.plan else "unchanged",
            len(decision.result.jobs),
            len(decision.assignments),
            decision.result.emissions_g,
            decision.result.baseline_g,
            decision.result.solve_seconds,
        )
        return decision
