"""A job's progress events on ``metatune.runs.progress``: at most every
``agent_progress_interval_s`` (evaluations and a new checkpoint always: the scheduler may pause a
job only once it has one past its start); the steps in between ride on the next event
(``RunProgress.points``) and those still held when the run ends go out before its outcome."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import Any

from metatune import subjects
from metatune.contracts import MetricPoint, RunProgress
from metatune.service import Service

from ..domain.run import Progress, SessionPace
from ..settings import AgentSettings
from .jobs import Job

log = logging.getLogger("metatune.agent")


def _session_fields(session: SessionPace) -> dict[str, Any]:
    return {
        "session_started_at": session.started_at,
        "session_start_step": session.start_step,
        "startup_s": session.startup_s,
        "startup_wall_s": session.startup_wall_s,
        "steps_per_hour": session.steps_per_hour,
        "tokens_per_second": session.tokens_per_second,
        "checkpoint_step": session.checkpoint_step,
    }


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("progress event not published: %r", future.exception())


class ProgressReports:
    """Publishes the progress of this agent's jobs (:meth:`publish` runs on the training thread)."""

    def __init__(self, service: Service, datacenter: str, settings: AgentSettings) -> None:
        self.service = service
        self.datacenter = datacenter
        self.settings = settings

    def publish(self, loop: asyncio.AbstractEventLoop | None, job: Job, progress: Progress) -> None:
        """Publish progress (at most every ``agent_progress_interval_s``, except evaluations and a
        new checkpoint: the scheduler may pause a job only once it has one past its start). A step
        not published is held and sent with the next event (``RunProgress.points``)."""
        job.step = progress.step
        now = time.monotonic()
        session = progress.session
        checkpoint = session.checkpoint_step if session is not None else None
        if (
            progress.kind == "step"
            and checkpoint == job.reported_checkpoint
            and now - job.last_progress < self.settings.agent_progress_interval_s
            and not job.steps.full
        ):
            job.steps.hold(progress, self.service.clock.now())
            return
        job.last_progress, job.reported_checkpoint = now, checkpoint
        at = job.steps.latest(self.service.clock.now())
        event = self.event(job, progress, at, job.steps.take())
        assert loop is not None
        future = asyncio.run_coroutine_threadsafe(
            self.service.publish(
                subjects.run_progress(self.datacenter, job.assignment.job_id), event
            ),
            loop,
        )
        future.add_done_callback(
            _log_failure
        )  # progress is advisory: a lost one must not stop training

    def event(
        self, job: Job, progress: Progress, at: datetime, points: list[MetricPoint]
    ) -> RunProgress:
        session = progress.session
        return RunProgress(
            occurred_at=at,
            job_id=job.assignment.job_id,
            datacenter=self.datacenter,
            step=progress.step,
            total_steps=progress.total_steps,
            train_loss=progress.train_loss,
            val_loss=progress.val_loss,
            learning_rate=progress.learning_rate,
            power_w=progress.power_w,
            step_time_s=progress.step_time_s,
            estimated_remaining_gpu_hours=progress.estimated_remaining_gpu_hours,
            accounting=progress.accounting,
            points=points,
            **(_session_fields(session) if session is not None else {}),
        )

    async def flush(self, job: Job) -> None:
        """The run ended: the steps held since the last progress event go out as one more (the
        newest as its own step, the rest as its points), before the run's outcome."""
        held = job.steps.flush()
        if held is None:
            return
        progress, at, points = held
        try:
            await self.service.publish(
                subjects.run_progress(self.datacenter, job.assignment.job_id),
                self.event(job, progress, at, points),
            )
        except Exception as exc:  # advisory, as every progress event: the outcome still goes out
            log.warning("job %s: last progress event not published: %r", job.assignment.job_id, exc)
