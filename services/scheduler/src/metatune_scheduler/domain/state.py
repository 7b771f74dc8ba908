"""What the scheduler knows, folded from events only, so replaying the stream rebuilds it.

The scheduler's own outputs (plans, assignments, infeasibility notices) are folded too: they
say what was committed, which is what a restarted scheduler must not send twice.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from uuid import UUID

from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    CarbonForecast,
    Event,
    InfeasibleSituation,
    JobCancelled,
    JobInfeasible,
    JobRequested,
    Plan,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
)
from metatune.provenance import RUN_EVENTS, ForeignRunEvent, foreign

from .plan_book import PlanBook


class JobStatus(StrEnum):
    pending = "pending"  # requested, never started
    running = "running"
    paused = "paused"  # checkpointed at ``location``
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"  # withdrawn (JobCancelled): stopped where it ran, never started again


ACTIVE = {JobStatus.pending, JobStatus.running, JobStatus.paused}


@dataclass(frozen=True)
class Pace:
    """How the scheduler turns measurements into hours to plan.

    ``min_run_h``: clock hours a started or resumed job runs, on top of its start-up, before it may
    be paused or moved; ``startup_h``: clock hours a (re)start costs until one has been measured;
    ``hour_wall_s``: real seconds per clock hour (3600, or the simulated clock's), to read an agent's
    real-time estimates in clock hours; ``await_checkpoint``: a running job waits for a checkpoint
    past its start before it may be paused even before its agent has reported anything (the
    trainer-agent reports them; off, only jobs whose agent did report wait for one)."""

    min_run_h: float = 0.0
    startup_h: float = 0.0
    hour_wall_s: float = 3600.0
    await_checkpoint: bool = False


@dataclass
class JobRecord:
    request: JobRequested
    remaining_gpu_hours: float  # training work (no start-up), as of ``run_since`` while running
    power_kw: float  # measured by the agent once it runs, else the recommender's estimate
    deadline: datetime  # the request's, or the earliest finish the scheduler offered
    status: JobStatus = JobStatus.pending
    location: str | None = None
    checkpoint_key: str | None = None
    run_since: datetime | None = None
    infeasible_reason: str | None = None
    situation: InfeasibleSituation | None = None  # the last one reported (JobInfeasible)
    notices: int = 0  # JobInfeasible events sent for it
    cancel_reason: str | None = (
        None  # set by JobCancelled; a running job keeps running until its stop is sent
    )
    startup_h: float | None = None  # clock hours its latest (re)start took, as the agent measured
    steps_per_hour: float | None = None  # its latest measured training rate, clock hours
    # The session (this start or resume): when it was assigned, whether it has trained yet, the
    # step it began from and its latest checkpoint, as the agent reports them.
    started_at: datetime | None = None
    stepping: bool = False
    reports_sessions: bool = False  # its agent reports session fields (checkpoints) at all
    session_start_step: int | None = None
    checkpoint_step: int | None = None
    # The energy model (one basis with the agents' meter): IT energy per optimizer step as the
    # agent metered it so far (the run's energy / its steps), and the steps it has left.
    energy_per_step_wh: float | None = None
    steps_left: int | None = None
    total_steps: int | None = None

    @property
    def requested_energy_kwh(self) -> float:
        """IT energy the request estimates for the whole job: its GPU-hours x power per GPU (the
        recommender's cost model), whatever the clock."""
        return self.request.estimated_gpu_hours * self.request.power_kw / self.request.gpus

    def remaining_energy_kwh(self) -> float:
        """IT energy still to draw: the steps left at the energy per step the agent metered, once
        it has; before, the request's estimate for the share of steps left (all of it, unrun)."""
        if self.steps_left is not None and self.energy_per_step_wh is not None:
            return self.energy_per_step_wh * self.steps_left / 1000.0
        if self.steps_left is not None and self.total_steps:
            return self.requested_energy_kwh * self.steps_left / self.total_steps
        return self.requested_energy_kwh

    @property
    def stopping(self) -> bool:
        """Cancelled while running: the plan leaves it out and the next diff stops it."""
        return self.cancel_reason is not None and self.status is JobStatus.running

    @property
    def job_id(self) -> UUID:
        return self.request.job_id

    def remaining_hours(self, now: datetime, pace: Pace = Pace()) -> int:
        """Whole clock hours still to run (at least 1 until the agent says it completed): the
        training work at the measured rate, plus a start-up for a job that is not running (each
        resume reloads model, data and checkpoint) or the rest of the one under way."""
        work = self.remaining_gpu_hours / self.request.gpus
        startup = self.startup_h if self.startup_h is not None else pace.startup_h
        if self.status is not JobStatus.running or self.run_since is None:
            return _wall_hours(work + startup, 1)
        if self.stepping:
            return _wall_hours(work - _hours(now - self.run_since), 1)
        started = self.started_at or self.run_since
        ready = started + timedelta(hours=startup)
        left = max(startup - _hours(now - started), 0.0)
        return _wall_hours(left + work - _hours(now - max(ready, self.run_since)), 1)

    def hold_hours(self, now: datetime, pace: Pace = Pace()) -> int:
        """Clock hours, from the current one, a running job keeps its datacenter: until it has run
        ``pace.min_run_h`` past its start-up and saved a checkpoint past the step it started from
        (when agents report checkpoints: ``pace.await_checkpoint``, or its agent did), so that no
        pause throws its start-up away. 0: it may be paused or moved now."""
        if self.status is not JobStatus.running or self.started_at is None:
            return 0
        startup = self.startup_h if self.startup_h is not None else pace.startup_h
        owed = pace.min_run_h + startup - _hours(now - self.started_at)
        saved = not (self.reports_sessions or pace.await_checkpoint) or (
            self.checkpoint_step is not None
            and self.checkpoint_step > (self.session_start_step or 0)
        )
        if saved and owed <= 1e-9:
            return 0
        return max(1, math.ceil(owed - 1e-9))

    @property
    def requested_hours(self) -> int:
        """Whole wall-clock hours the job asked for when it was requested."""
        return _wall_hours(self.request.estimated_gpu_hours, self.request.gpus)

    def _stop_clock(self, at: datetime) -> None:
        """The work done since the last measurement (time spent starting up is not work)."""
        if self.status is JobStatus.running and self.run_since is not None:
            since = self.run_since
            if not self.stepping and self.started_at is not None:
                since = max(since, self.started_at + timedelta(hours=self.startup_h or 0.0))
            ran = _hours(at - since)
            self.remaining_gpu_hours = max(self.remaining_gpu_hours - self.request.gpus * ran, 0.0)
        self.run_since = None


def _moved_away(job: JobRecord, datacenter: str) -> bool:
    """The job runs at another datacenter now: a late pause from where it ran before (an agent cut
    off past its lease, then re-planned elsewhere) says nothing about the current run."""
    return (
        job.status is JobStatus.running and job.location is not None and job.location != datacenter
    )


def _wall_hours(gpu_hours: float, gpus: int) -> int:
    return max(1, math.ceil(gpu_hours / gpus - 1e-9))


def _hours(delta: timedelta) -> float:
    return max(delta.total_seconds(), 0.0) / 3600


@dataclass
class SchedulerState:
    pace: Pace = field(default_factory=Pace)
    jobs: dict[UUID, JobRecord] = field(default_factory=dict)
    measured_startup_h: float | None = None  # the latest start-up any agent measured
    forecasts: dict[str, CarbonForecast] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)  # GPUs per datacenter reported by agents
    last_plan: PlanBook | None = None  # folded from every part of every version published
    first_requested_at: datetime | None = (
        None  # the earliest request folded: where the request log begins
    )
    early_cancellations: dict[UUID, JobCancelled] = field(
        default_factory=dict
    )  # cancelled before their request was folded
    _seen: set[UUID] = field(default_factory=set)

    def planning_pace(self) -> Pace:
        """The pace with the latest measured start-up standing in for jobs never started."""
        if self.measured_startup_h is None:
            return self.pace
        return dataclasses.replace(self.pace, startup_h=self.measured_startup_h)

    def active_jobs(self) -> list[JobRecord]:
        """Jobs an agent may still be running or may run: what assignments are diffed against."""
        return [job for job in self.jobs.values() if job.status in ACTIVE]

    def plannable_jobs(self) -> list[JobRecord]:
        """Active jobs the plan places: not those cancelled while running (they are being stopped)."""
        return [job for job in self.active_jobs() if job.cancel_reason is None]

    def seen(self, event_id: UUID) -> bool:
        return event_id in self._seen

    def foreign(self, event: Event) -> ForeignRunEvent | None:
        """A run event not from the datacenter its job is assigned to now (a forgery, or a stale
        report from where it ran before it moved): refused, never folded. A pending job is
        assigned nowhere; a paused or finished one where it last ran."""
        if not isinstance(event, RUN_EVENTS):
            return None
        job = self.jobs.get(event.job_id)
        return foreign(event, job.location if job is not None else None)

    def apply(self, event: Event) -> bool:
        """Fold one event; returns whether it could change the plan (False for an event already
        folded, as replay and live delivery overlap, and for a heartbeat that changes nothing)."""
        if event.event_id in self._seen:
            return False
        self._seen.add(event.event_id)
        if self.foreign(event) is not None:
            return False
        match event:
            case JobRequested():
                if event.job_id not in self.jobs:
                    record = self.jobs[event.job_id] = JobRecord(
                        event, event.estimated_gpu_hours, event.power_kw, event.deadline
                    )
                    early = self.early_cancellations.pop(event.job_id, None)
                    if early is not None and early.tenant == event.spec.tenant:
                        record.status, record.cancel_reason = JobStatus.cancelled, early.reason
                    if (
                        self.first_requested_at is None
                        or event.occurred_at < self.first_requested_at
                    ):
                        self.first_requested_at = event.occurred_at
            case CarbonForecast():
                current = self.forecasts.get(event.region)
                if current is None or event.issued_at >= current.issued_at:
                    self.forecasts[event.region] = event
            case AgentStatus():
                changed = self.capacity.get(event.datacenter) != event.gpus_total
                self.capacity[event.datacenter] = event.gpus_total
                return changed
            case Plan():
                if self.last_plan is None:
                    self.last_plan = PlanBook.of(event)
                elif event.plan_version >= self.last_plan.plan_version:
                    self.last_plan.fold(event)
            case Assignment():
                self._assigned(event)
            case JobInfeasible():
                if (job := self.jobs.get(event.job_id)) is not None:
                    job.infeasible_reason = event.reason
                    job.situation = event.situation
                    job.notices += 1
                    if event.earliest_finish is not None:
                        job.deadline = max(job.deadline, event.earliest_finish)
            case JobCancelled():
                self._cancel(event)
            case RunProgress():
                self._progress(event)
            case RunPaused():
                if (
                    (job := self.jobs.get(event.job_id)) is not None
                    and job.status in ACTIVE
                    and not _moved_away(job, event.datacenter)
                ):
                    job._stop_clock(event.occurred_at)
                    job.status = (
                        JobStatus.cancelled if job.cancel_reason is not None else JobStatus.paused
                    )
                    job.location, job.checkpoint_key = event.datacenter, event.checkpoint_key
            case RunCompleted() | RunFailed():
                if (job := self.jobs.get(event.job_id)) is not None:
                    job._stop_clock(event.occurred_at)
                    if isinstance(event, RunCompleted):  # it finished before the stop reached it
                        job.status = JobStatus.completed
                    else:  # a cancelled job's run ended: cancelled, whether its stop was folded
                        # before this report (live: outputs fold at once) or after (a replay)
                        job.status = (
                            JobStatus.failed if job.cancel_reason is None else JobStatus.cancelled
                        )
                    job.location = event.datacenter
        return True

    def cancel_refused(self, event: JobCancelled) -> str | None:
        """Why ``event`` cancels nothing: the job is another tenant's (None: it may cancel)."""
        job = self.jobs.get(event.job_id)
        if job is None or job.request.spec.tenant == event.tenant:
            return None
        return f"job {event.job_id} is not tenant {event.tenant!r}'s: not cancelled"

    def _cancel(self, event: JobCancelled) -> None:
        """A pending or paused job is cancelled at once; a running one once its stop is sent; a
        finished one stays as it ended; another tenant's is not cancelled. A job not requested yet
        is cancelled when its request comes, if it is the same tenant's."""
        job = self.jobs.get(event.job_id)
        if job is None:
            self.early_cancellations[event.job_id] = event
            return
        if job.status not in ACTIVE or self.cancel_refused(event) is not None:
            return
        job.cancel_reason = event.reason
        if job.status is not JobStatus.running:
            job.status = JobStatus.cancelled

    def _assigned(self, event: Assignment) -> None:
        job = self.jobs.get(event.job_id)
        if job is None:
            return
        if (
            job.status is JobStatus.cancelled
            and job.cancel_reason is not None
            and event.action in (AssignmentAction.start, AssignmentAction.resume)
        ):
            # The start went out before the cancellation was folded (live, consumers lag; a replay
            # folds the stream in stored order): an agent is running it, so it must still be stopped.
            job.status, job.location, job.run_since = (
                JobStatus.running,
                event.datacenter,
                event.occurred_at,
            )
            return
        if job.status not in ACTIVE:
            return
        if event.action in (AssignmentAction.start, AssignmentAction.resume):
            job.status, job.location, job.run_since = (
                JobStatus.running,
                event.datacenter,
                event.occurred_at,
            )
            job.started_at, job.stepping = event.occurred_at, False
            job.session_start_step = job.checkpoint_step = None
        elif event.action is AssignmentAction.pause:
            job._stop_clock(event.occurred_at)
            job.status = JobStatus.paused
            if (
                event.checkpoint_key is not None
            ):  # paused by the scheduler itself (agent lost): resume from there
                job.checkpoint_key = event.checkpoint_key
        elif event.action is AssignmentAction.stop:
            job._stop_clock(event.occurred_at)
            job.status = JobStatus.cancelled if job.cancel_reason is not None else JobStatus.failed

    def _progress(self, event: RunProgress) -> None:
        """Remaining work from the measured rate: steps left / steps per clock hour once the run
        has stepped, else the agent's estimate from its smoke test (real seconds, read in clock
        hours), else the request's estimate scaled by the steps left. The start-up it measured
        prices every later (re)start."""
        job = self.jobs.get(event.job_id)
        if job is None or job.status not in ACTIVE:
            return
        gpus = job.request.gpus
        left_steps = max(event.total_steps - event.step, 0)
        job.steps_left, job.total_steps = left_steps, event.total_steps
        if event.step > 0 and event.accounting.energy_wh > 0:
            job.energy_per_step_wh = event.accounting.energy_wh / event.step
        if event.steps_per_hour is not None:
            job.steps_per_hour = event.steps_per_hour
            job.remaining_gpu_hours = gpus * left_steps / event.steps_per_hour
        elif event.estimated_remaining_gpu_hours is not None:
            job.remaining_gpu_hours = (
                event.estimated_remaining_gpu_hours * 3600 / self.pace.hour_wall_s
            )
        else:
            left = left_steps / event.total_steps
            job.remaining_gpu_hours = job.request.estimated_gpu_hours * left
        if event.startup_s is not None:
            job.startup_h = self.measured_startup_h = event.startup_s / 3600
        if event.power_w > 0:
            job.power_kw = event.power_w / 1000
        current = (
            job.status is JobStatus.running
            and event.datacenter == job.location
            and (
                event.session_started_at is None
                or job.started_at is None
                or event.session_started_at >= job.started_at
            )
        )
        if not current:  # a late report of an earlier session: its measurements, not its state
            return
        job.run_since = event.occurred_at
        if event.session_start_step is None:  # an agent that does not report sessions
            job.stepping = True
        else:
            job.reports_sessions = True
            job.session_start_step = event.session_start_step
            job.stepping = job.stepping or event.steps_per_hour is not None
            if event.checkpoint_step is not None:
                job.checkpoint_step = event.checkpoint_step
