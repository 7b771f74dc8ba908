"""What a run leaves: its outcome published (completed with its adapter uploaded, paused with its
checkpoint, stopped or failed), each through a bus outage and sealed with the agent's run key;
the object-store keys of checkpoints (``checkpoints/<job_id>``, the latest, overwritten) and
adapters (``adapters/<job_id>.tar``)."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from metatune import msgids, subjects
from metatune.bus import ADAPTERS_BUCKET, CHECKPOINTS_BUCKET
from metatune.contracts import (
    Assignment,
    CurvePoint,
    FailureReason,
    Hardware,
    RunAccounting,
    RunCompleted,
    RunFailed,
    RunMetrics,
    RunPaused,
)
from metatune.registry import Datacenter
from metatune.service import Service

from ..domain.errors import TrainingError
from ..domain.run import RunOutcome
from ..settings import AgentSettings
from .hardware import cpu_model
from .jobs import Job
from .uploads import with_retries

log = logging.getLogger("metatune.agent")


def completion_curve(outcome: RunOutcome) -> list[CurvePoint]:
    """The run's periodic evaluations as a learning curve; the metric is accuracy where the task has
    one, else minus the perplexity (higher is better either way)."""
    total = max(1, outcome.total_steps)
    losses = dict(outcome.loss_history)
    curve = []
    for step, evaluation in outcome.evaluations:
        metric = evaluation.accuracy
        if metric is None and evaluation.perplexity is not None:
            metric = -evaluation.perplexity
        curve.append(
            CurvePoint(
                step=step,
                fraction=min(1.0, step / total),
                val_loss=evaluation.loss,
                metric=metric,
                train_loss=losses.get(step),
            )
        )
    return curve


def checkpoint_key(job_id: UUID) -> str:
    return str(job_id)


def adapter_key(job_id: UUID) -> str:
    return f"{job_id}.tar"


class RunResults:
    """Publishes this agent's run outcomes and saves their checkpoints."""

    def __init__(
        self, service: Service, datacenter: Datacenter, settings: AgentSettings, run_key: bytes
    ) -> None:
        self.service = service
        self.dc = datacenter
        self.settings = settings
        self.run_key = run_key  # seals the outcomes' message ids: no peer can publish first

    async def publish_retrying(
        self, subject: str, event: Any, *, msg_id: str | None = None
    ) -> None:
        """Publish a result through a bus outage (de-duplicated by ``msg_id``, so a retry is stored once)."""
        await with_retries(
            self.settings,
            f"publish on {subject}",
            lambda: self.service.publish(subject, event, msg_id=msg_id),
        )

    async def save_checkpoint(self, job: Job, data: bytes) -> str:
        objects = self.service.objects
        assert objects is not None
        key = checkpoint_key(job.assignment.job_id)
        if (
            job.uploader is not None
        ):  # an older checkpoint still uploading must not land after this one
            await job.uploader.flush()
        await with_retries(
            self.settings,
            f"job {job.assignment.job_id} checkpoint upload",
            lambda: objects.put_bytes(CHECKPOINTS_BUCKET, key, data),
        )
        return key

    async def publish_outcome(self, job: Job, outcome: RunOutcome) -> None:
        assignment = job.assignment
        objects = self.service.objects
        assert objects is not None
        now = self.service.clock.now()
        if outcome.status == "completed":
            assert (
                outcome.adapter is not None
                and outcome.evaluation is not None
                and assignment.config is not None
            )
            adapter = outcome.adapter
            await with_retries(
                self.settings,
                f"job {assignment.job_id} adapter upload",
                lambda: objects.put_bytes(ADAPTERS_BUCKET, adapter_key(assignment.job_id), adapter),
            )
            e = outcome.evaluation
            event = RunCompleted(
                occurred_at=now,
                job_id=assignment.job_id,
                study_id=assignment.study_id,
                datacenter=self.dc.name,
                config=assignment.config,
                metrics=RunMetrics(
                    val_loss=e.loss,
                    accuracy=e.accuracy,
                    macro_f1=e.macro_f1,
                    perplexity=e.perplexity,
                ),
                steps=outcome.step,
                early_stopped=outcome.early_stopped,
                stop_reason=outcome.stop_reason,
                adapter_key=adapter_key(assignment.job_id),
                accounting=outcome.accounting,
                base_model=assignment.spec.base_model if assignment.spec else None,
                task=assignment.spec.task if assignment.spec else None,
                planned_steps=outcome.total_steps,
                curve=completion_curve(outcome),
                majority_baseline=outcome.majority_baseline,
                hardware=self.hardware(outcome, assignment.gpus),
                dataset_sha256=assignment.spec.dataset.sha256 if assignment.spec else None,
            )
            await self.publish_retrying(
                subjects.runs_completed(self.dc.name),
                event,
                msg_id=msgids.completed(self.run_key, assignment.job_id, self.dc.name),
            )
        elif outcome.status == "paused":
            assert outcome.checkpoint is not None
            key = await self.save_checkpoint(job, outcome.checkpoint)
            paused = RunPaused(
                occurred_at=now,
                job_id=assignment.job_id,
                study_id=assignment.study_id,
                datacenter=self.dc.name,
                step=outcome.step,
                checkpoint_key=key,
                accounting=outcome.accounting,
            )
            await self.publish_retrying(
                subjects.runs_paused(self.dc.name),
                paused,
                msg_id=msgids.paused(self.run_key, assignment.event_id),
            )
        else:
            await self.publish_failed(
                assignment,
                RuntimeError(f"stopped by the scheduler at step {outcome.step}"),
                reason=FailureReason.stopped,
                accounting=outcome.accounting,
            )

    def hardware(self, outcome: RunOutcome, gpus: int) -> Hardware:
        on_gpu = outcome.device.startswith("cuda")
        gpu_model = self.dc.gpu_model
        if on_gpu:
            import torch

            gpu_model = torch.cuda.get_device_name(0) if torch.cuda.is_available() else gpu_model
        return Hardware(
            device=outcome.device.split(":")[0],
            gpu_model=gpu_model if on_gpu else None,
            gpu_count=gpus if on_gpu else 0,
            cpu_model=cpu_model() or None,
            precision=outcome.precision,
        )

    async def publish_failed(
        self,
        assignment: Assignment,
        exc: BaseException,
        *,
        reason: FailureReason | None = None,
        accounting: RunAccounting | None = None,
    ) -> None:
        reason = reason or (
            exc.reason if isinstance(exc, TrainingError) else FailureReason.internal
        )
        event = RunFailed(
            occurred_at=self.service.clock.now(),
            job_id=assignment.job_id,
            study_id=assignment.study_id,
            datacenter=self.dc.name,
            reason=reason,
            message=str(exc) or type(exc).__name__,
            accounting=accounting or RunAccounting(),
            config=assignment.config,
            base_model=assignment.spec.base_model if assignment.spec else None,
            task=assignment.spec.task if assignment.spec else None,
        )
        log.warning("job %s failed (%s): %s", assignment.job_id, reason.value, event.message)
        await self.publish_retrying(
            subjects.runs_failed(self.dc.name),
            event,
            msg_id=msgids.failed(self.run_key, assignment.event_id),
        )
