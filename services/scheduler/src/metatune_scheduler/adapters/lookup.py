"""``metatune.requests.jobs.lookup``: where a job stands, read from the scheduler's state (never
changed by a lookup)."""

from __future__ import annotations

from uuid import UUID

from metatune.contracts import JobLookupReply, JobState

from ..domain.state import JobRecord, JobStatus, SchedulerState

_STATES: dict[JobStatus, JobState] = {
    JobStatus.paused: "paused",
    JobStatus.completed: "finished",
    JobStatus.failed: "finished",
    JobStatus.cancelled: "cancelled",
}


def state_of(job: JobRecord) -> JobState:
    """A pending job is ``infeasible`` while it cannot be placed, else ``requested``; a started one
    is ``assigned`` until its agent reports it training, then ``running``."""
    if job.status is JobStatus.pending:
        return "infeasible" if job.infeasible_reason is not None else "requested"
    if job.status is JobStatus.running:
        return "running" if job.stepping else "assigned"
    return _STATES[job.status]


def lookup(state: SchedulerState, job_id: UUID, tenant: str | None = None) -> JobLookupReply:
    """Where ``job_id`` stands; asked by ``tenant`` (None: the admin), another tenant's job is
    answered as unknown."""
    job = state.jobs.get(job_id)
    if job is None or (tenant is not None and job.request.spec.tenant != tenant):
        # never requested (a cancellation that came first does not make it known)
        return JobLookupReply(job_id=job_id, known=False)
    return JobLookupReply(
        job_id=job_id, known=True, study_id=job.request.study_id, state=state_of(job)
    )
