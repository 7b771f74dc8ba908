"""Telemetry stores a run event only from the datacenter its job is assigned to at that point of
the log: a forgery or a report from before a move is a ``foreign_run_event`` reject (no metric, no
result), judged the same when its batch is delivered again."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from metatune import contracts as c
from metatune import subjects
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.samples import CONFIG, NOW, STUDY

from .conftest import count

H = timedelta(hours=1)


def _assignment(job, datacenter: str, action: c.AssignmentAction, at) -> c.Assignment:
    return c.Assignment(
        occurred_at=at,
        job_id=job,
        study_id=STUDY,
        datacenter=datacenter,
        action=action,
        plan_version=1,
    )


def _progress(job, datacenter: str, step: int) -> c.RunProgress:
    return c.RunProgress(
        occurred_at=NOW + step * timedelta(minutes=1),
        job_id=job,
        datacenter=datacenter,
        step=step,
        total_steps=100,
    )


def _completed(job, datacenter: str) -> c.RunCompleted:
    return c.RunCompleted(
        occurred_at=NOW + 3 * H,
        job_id=job,
        study_id=STUDY,
        datacenter=datacenter,
        config=CONFIG,
        metrics=c.RunMetrics(val_loss=0.3, accuracy=0.9),
        steps=100,
        accounting=c.RunAccounting(),
    )


async def test_forged_and_stale_run_events_are_rejected_and_genuine_ones_stored(db) -> None:
    writer = EventWriter(db)
    job = uuid4()
    A = c.AssignmentAction
    log = [
        (subjects.assignments("osl1"), _assignment(job, "osl1", A.start, NOW)),
        (subjects.run_progress("osl1", job), _progress(job, "osl1", 1)),  # genuine
        (subjects.run_progress("fra1", job), _progress(job, "fra1", 2)),  # forged by fra1
        (subjects.runs_completed("fra1"), _completed(job, "fra1")),  # forged by fra1
        (subjects.assignments("osl1"), _assignment(job, "osl1", A.pause, NOW + H)),
        (subjects.run_progress("osl1", job), _progress(job, "osl1", 3)),  # before its pause
        (subjects.assignments("fra1"), _assignment(job, "fra1", A.resume, NOW + 2 * H)),
        (subjects.run_progress("osl1", job), _progress(job, "osl1", 4)),  # stale: it moved
        (subjects.run_progress("fra1", job), _progress(job, "fra1", 5)),  # genuine, at fra1
        (subjects.runs_completed("fra1"), _completed(job, "fra1")),  # genuine
    ]
    messages = [
        Incoming("METATUNE", i + 1, subject, event.to_bytes())
        for i, (subject, event) in enumerate(log)
    ]
    first = await writer.write(messages[:3])  # the assignment is stored in an earlier batch
    second = await writer.write(messages[3:])
    again = await writer.write(messages[5:])  # a redelivered batch, judged as the first time
    refused = [(m.seq, r.code) for m, r in first.rejected + second.rejected]
    assert refused == [(3, "foreign_run_event"), (4, "foreign_run_event"), (8, "foreign_run_event")]
    assert [(m.seq, r.code) for m, r in again.rejected] == [(8, "foreign_run_event")]
    steps = await db.fetch("SELECT datacenter, step FROM run_metrics ORDER BY step")
    assert steps == [("osl1", 1), ("osl1", 3), ("fra1", 5)]
    assert await db.fetch("SELECT datacenter, status FROM run_results") == [("fra1", "completed")]
    assert await count(db, "SELECT count(*) FROM event_rejects") == 3
