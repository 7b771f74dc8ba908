"""The scheduler folds a run event only from the datacenter its job is assigned to at that time: a
forgery from another datacenter, or a stale report from where the job ran before it moved, is
refused (``foreign_run_event``) and changes nothing; which report came first decides nothing."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from metatune.contracts import (
    Assignment,
    AssignmentAction,
    FailureReason,
    RunAccounting,
    RunCompleted,
    RunFailed,
    RunMetrics,
    RunPaused,
    RunProgress,
)
from metatune.provenance import foreign, mislabelled
from metatune_scheduler.domain.state import JobStatus, SchedulerState

from .conftest import NOW, job_id, job_requested

H = timedelta(hours=1)


def _assigned(n: int, datacenter: str, action: AssignmentAction, at, version: int) -> Assignment:
    return Assignment(
        occurred_at=at,
        job_id=job_id(n),
        study_id=job_id(1000 + n),
        datacenter=datacenter,
        action=action,
        plan_version=version,
        checkpoint_key=str(job_id(n)) if action is AssignmentAction.resume else None,
    )


def _completed(n: int, datacenter: str, accuracy: float) -> RunCompleted:
    return RunCompleted(
        occurred_at=NOW + 3 * H,
        job_id=job_id(n),
        study_id=job_id(1000 + n),
        datacenter=datacenter,
        config=job_requested(n, hours=1).config,
        metrics=RunMetrics(val_loss=0.3, accuracy=accuracy),
        steps=100,
        accounting=RunAccounting(),
    )


def _state() -> SchedulerState:
    state = SchedulerState()
    state.apply(job_requested(1, hours=4))
    state.apply(job_requested(2, hours=4))  # never assigned: pending
    state.apply(_assigned(1, "osl1", AssignmentAction.start, NOW, 1))
    return state


def test_a_forged_completion_failure_and_progress_change_nothing() -> None:
    state = _state()
    before = state.jobs[job_id(1)].remaining_gpu_hours
    forged = [
        _completed(1, "fra1", 0.9999),
        RunFailed(
            occurred_at=NOW,
            job_id=job_id(2),
            datacenter="fra1",
            reason=FailureReason.internal,
            message="forged",
        ),
        RunProgress(
            occurred_at=NOW + H,
            job_id=job_id(1),
            datacenter="fra1",
            step=99,
            total_steps=100,
            steps_per_hour=1e6,
        ),
    ]
    for event in forged:
        refusal = state.foreign(event)
        assert refusal is not None and refusal.report()["code"] == "foreign_run_event"
        assert not state.apply(event)
    running, pending = state.jobs[job_id(1)], state.jobs[job_id(2)]
    assert (running.status, running.location) == (JobStatus.running, "osl1")
    assert running.remaining_gpu_hours == before and running.steps_per_hour is None
    assert pending.status is JobStatus.pending
    # the genuine completion, later, counts: first writer no longer wins
    genuine = _completed(1, "osl1", 0.95)
    assert state.foreign(genuine) is None and state.apply(genuine)
    assert running.status is JobStatus.completed


def test_a_stale_report_from_before_a_move_is_refused() -> None:
    state = _state()
    state.apply(_assigned(1, "osl1", AssignmentAction.pause, NOW + H, 2))
    state.apply(
        RunPaused(
            occurred_at=NOW + H,
            job_id=job_id(1),
            study_id=job_id(1001),
            datacenter="osl1",
            step=40,
            checkpoint_key=str(job_id(1)),
        )
    )
    state.apply(_assigned(1, "fra1", AssignmentAction.resume, NOW + 2 * H, 3))
    job = state.jobs[job_id(1)]
    assert (job.status, job.location) == (JobStatus.running, "fra1")
    stale = [  # osl1's agent, cut off, reports late
        RunProgress(
            occurred_at=NOW + H, job_id=job_id(1), datacenter="osl1", step=45, total_steps=100
        ),
        _completed(1, "osl1", 0.9),
    ]
    for event in stale:
        refusal = state.foreign(event)
        assert refusal is not None and refusal.assigned == "fra1"
        assert not state.apply(event)
    assert (job.status, job.location) == (JobStatus.running, "fra1")
    assert state.apply(_completed(1, "fra1", 0.93)) and job.status is JobStatus.completed


def test_a_payload_naming_another_datacenter_than_its_subject_is_refused() -> None:
    event = _completed(1, "osl1", 0.95)
    assert mislabelled(event, "metatune.runs.osl1.completed") is None
    refusal = mislabelled(event, "metatune.runs.fra1.completed")
    assert refusal is not None and "published under fra1 but claims osl1" in refusal.message
    assert foreign(event, "osl1", "metatune.runs.fra1.completed") is not None
    assert foreign(event, "osl1", "metatune.jobs.requested") is not None  # not a run subject
    assert foreign(event, None) is not None  # assigned nowhere
    assert mislabelled(event.model_copy(update={"job_id": uuid4()}), "x.y") is not None
