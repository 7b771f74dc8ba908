"""What the scheduler knows, folded from events only, so replaying the stream rebuilds it.

The scheduler's own outputs (plans, assignments, infeasibility notices) are folded too: they
say what was committed, which is what a restarted scheduler must not send twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    CarbonForecast,
    Event,
    JobCancelled,
    JobInfeasible,
    JobRequested,
    Plan,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
)

from .plan_book import PlanBook


class JobStatus(StrEnum):
    pending = "pending"  # requested, never started
    running = "running"
    paused = "paused"  # checkpointed at ``location``
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"  # withdrawn (JobCancelled): stopped where it ran, never started again


ACTIVE = {JobStatus.pending, JobStatus.running, JobStatus.paused}


@dataclass
class JobRecord:
    request: JobRequested
    remaining_gpu_hours: float  # as of ``run_since`` while running, else now
    power_kw: float  # measured by the agent once it runs, else the recommender's estimate
    deadline: datetime  # the request's, or the earliest finish the scheduler offered
    status: JobStatus = JobStatus.pending
    location: str | None = None
    checkpoint_key: str | None = None
    run_since: datetime | None = None
    infeasible_reason: str | None = None
    cancel_reason: str | None = (
        None  # set by JobCancelled; a running job keeps running until its stop is sent
    )

    @property
    def stopping(self) -> bool:
        """Cancelled while running: the plan leaves it out and the next diff stops it."""
        return self.cancel_reason is not None and self.status is JobStatus.running

    @property
    def job_id(self) -> UUID:
        return self.request.job_id

    def remaining_hours(self, now: datetime) -> int:
        """Whole wall-clock hours still to run (at least 1 until the agent says it completed)."""
        gpu_hours = self.remaining_gpu_hours
        if self.status is JobStatus.running and self.run_since is not None:
            gpu_hours -= self.request.gpus * max((now - self.run_since).total_seconds(), 0) / 3600
        return _wall_hours(gpu_hours, self.request.gpus)

    @property
    def requested_hours(self) -> int:
        """Whole wall-clock hours the job asked for when it was requested."""
        return _wall_hours(self.request.estimated_gpu_hours, self.request.gpus)

    def _stop_clock(self, at: datetime) -> None:
        if self.status is JobStatus.running and self.run_since is not None:
            ran = max((at - self.run_since).total_seconds(), 0) / 3600
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


@dataclass
class SchedulerState:
    jobs: dict[UUID, JobRecord] = field(default_factory=dict)
    forecasts: dict[str, CarbonForecast] = field(default_factory=dict)
    capacity: dict[str, int] = field(default_factory=dict)  # GPUs per datacenter reported by agents
    last_plan: PlanBook | None = None  # folded from every part of every version published
    first_requested_at: datetime | None = (
        None  # the earliest request folded: where the request log begins
    )
    early_cancellations: dict[UUID, str] = field(
        default_factory=dict
    )  # cancelled before their request was folded
    _seen: set[UUID] = field(default_factory=set)

    def active_jobs(self) -> list[JobRecord]:
        """Jobs an agent may still be running or may run: what assignments are diffed against."""
        return [job for job in self.jobs.values() if job.status in ACTIVE]

    def plannable_jobs(self) -> list[JobRecord]:
        """Active jobs the plan places: not those cancelled while running (they are being stopped)."""
        return [job for job in self.active_jobs() if job.cancel_reason is None]

    def seen(self, event_id: UUID) -> bool:
        return event_id in self._seen

    def apply(self, event: Event) -> bool:
        """Fold one event; returns whether it could change the plan (False for an event already
        folded, as replay and live delivery overlap, and for a heartbeat that changes nothing)."""
        if event.event_id in self._seen:
            return False
        self._seen.add(event.event_id)
        match event:
            case JobRequested():
                if event.job_id not in self.jobs:
                    record = self.jobs[event.job_id] = JobRecord(
                        event, event.estimated_gpu_hours, event.power_kw, event.deadline
                    )
                    if (reason := self.early_cancellations.pop(event.job_id, None)) is not None:
                        record.status, record.cancel_reason = JobStatus.cancelled, reason
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
                    elif job.status is not JobStatus.cancelled:
                        job.status = JobStatus.failed
                    job.location = event.datacenter
        return True

    def _cancel(self, event: JobCancelled) -> None:
        """A pending or paused job is cancelled at once; a running one once its stop is sent; a
        finished one stays as it ended. A job not requested yet is cancelled when its request comes."""
        job = self.jobs.get(event.job_id)
        if job is None:
            self.early_cancellations[event.job_id] = event.reason
            return
        if job.status not in ACTIVE:
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
        job = self.jobs.get(event.job_id)
        if job is None or job.status not in ACTIVE:
            return
        if event.estimated_remaining_gpu_hours is not None:
            job.remaining_gpu_hours = event.estimated_remaining_gpu_hours
        else:
            left = 1 - event.step / event.total_steps
            job.remaining_gpu_hours = job.request.estimated_gpu_hours * max(left, 0.0)
        if job.status is JobStatus.running:
            job.run_since = event.occurred_at
        if event.power_w > 0:
            job.power_kw = event.power_w / 1000
