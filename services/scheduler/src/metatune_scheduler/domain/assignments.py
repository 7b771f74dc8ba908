"""Plan diffing: what each datacenter must change in the current hour.

Event ids are uuid5 of (job, action, datacenter, stretch start), so re-sending the same
change (after a restart, or a retried publish) carries the same id: JetStream de-duplicates
it and an agent that keeps the ids it has applied ignores it.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid5

from metatune.contracts import Assignment, AssignmentAction

from .horizon import epoch_hour, from_epoch_hour
from .ids import NAMESPACE
from .planner import PlanResult
from .state import JobRecord, JobStatus


def change_id(job_id: UUID, action: AssignmentAction, datacenter: str, stretch: datetime) -> UUID:
    return uuid5(NAMESPACE, f"{job_id}/{action}/{datacenter}/{stretch.isoformat()}")


def diff(
    plan: PlanResult, jobs: list[JobRecord], now: datetime, plan_version: int
) -> list[Assignment]:
    """Assignments that bring the current hour in line with ``plan`` (none if it already is)."""
    hour = epoch_hour(now)
    stretch = from_epoch_hour(hour)
    target = plan.running_at(hour)
    changes: list[Assignment] = []

    def make(job: JobRecord, action: AssignmentAction, datacenter: str) -> Assignment:
        planned = plan.jobs.get(job.job_id)
        run = 0
        if action in (AssignmentAction.start, AssignmentAction.resume) and planned is not None:
            while planned.at(hour + run) == datacenter:
                run += 1
        request = job.request
        return Assignment(
            event_id=change_id(job.job_id, action, datacenter, stretch),
            occurred_at=now,
            job_id=job.job_id,
            study_id=request.study_id,
            datacenter=datacenter,
            action=action,
            plan_version=plan_version,
            spec=request.spec,
            config=request.config,
            gpus=request.gpus,
            checkpoint_key=job.checkpoint_key if action is AssignmentAction.resume else None,
            hours_planned=float(run),
            estimated_gpu_hours=job.remaining_gpu_hours or None,
        )

    for job in sorted(jobs, key=lambda record: str(record.job_id)):
        where = target.get(job.job_id)
        if job.stopping and job.location is not None:
            changes.append(make(job, AssignmentAction.stop, job.location))
        elif job.status is JobStatus.running and where != job.location and job.location is not None:
            changes.append(make(job, AssignmentAction.pause, job.location))
        elif job.status is JobStatus.pending and where is not None:
            changes.append(make(job, AssignmentAction.start, where))
        elif (
            job.status is JobStatus.paused and where is not None and job.checkpoint_key is not None
        ):
            changes.append(make(job, AssignmentAction.resume, where))
    return changes
