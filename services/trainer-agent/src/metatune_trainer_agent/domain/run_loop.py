"""The loop of a training run, once it is set up: evaluate at step 0, step, evaluate, early-stop,
checkpoint and report until the run ends or is told to pause or stop.

Its state is in named parts, each whole from its ``__init__``: :class:`RunHistory` (losses,
evaluations, why it stopped), :class:`SessionTiming` (when the session was taken up and became
ready, its training seconds and last checkpoint), the :class:`~.run_accounting.RunAccountant`
(energy, carbon, tokens, hours) and the :class:`LoopSetup` the set-up handed over.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

import torch
from peft import get_peft_model_state_dict

from metatune.clock import Clock

from .checkpoint import Checkpoint
from .device import Accelerator
from .distributed import Group
from .encoding import EncodedDataset
from .errors import OutOfMemory
from .pacing import StepPacer
from .plateau import PlateauDetector
from .request import TrainingRequest
from .resources import RunResources
from .run_accounting import RunAccountant
from .run_types import Control, Progress, RunHooks, RunOutcome, SessionPace, Site
from .trainer import Evaluation, Trainer, is_oom


@dataclass(frozen=True)
class LoopSetup:
    """What the set-up (:class:`~.run.TrainingRun`) hands the loop: the request and where it
    runs, the prepared data, trainer and plateau detector, and the account opened."""

    request: TrainingRequest
    site: Site
    clock: Clock
    hooks: RunHooks
    planned_hours: float | None
    group: Group
    accelerator: Accelerator
    resources: RunResources
    data: EncodedDataset
    fingerprint: str
    trainer: Trainer
    plateau: PlateauDetector
    trainable: int
    accountant: RunAccountant
    taken_up: tuple[datetime, float]  # (clock time, monotonic) the caller took the run up
    step_time: float | None  # the smoke test's estimate
    prior_evaluations: list[tuple[int, Evaluation]]  # a resumed run's curve


@dataclass
class RunHistory:
    """What the loop has seen: the periodic evaluations (step 0 first), losses, why it stopped."""

    evaluations: list[tuple[int, Evaluation]]
    loss_history: list[tuple[int, float]] = field(default_factory=list)
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    initial_val: float | None = None
    stop_reason: str | None = None

    def record(self, step: int, evaluation: Evaluation) -> float:
        self.eval_history.append((step, evaluation.loss))
        self.evaluations.append((step, evaluation))
        return evaluation.loss


@dataclass
class SessionTiming:
    """This session: taken up and ready (clock time, monotonic), its first step, the seconds spent
    in optimizer steps and the step of its last checkpoint."""

    taken_up: tuple[datetime, float]
    ready: tuple[datetime, float]
    start_step: int
    train_seconds: float = 0.0
    checkpoint_step: int | None = None


class TrainingLoop:
    """A set-up run from its first evaluation to its outcome. ``__init__`` starts it: the pacer
    (simulated time), the evaluation at step 0, the start-up's lap; :meth:`run` steps it."""

    def __init__(self, setup: LoopSetup) -> None:
        self.request = setup.request
        self.options = setup.request.options
        self.config = setup.request.config
        self.site = setup.site
        self.clock = setup.clock
        self.hooks = setup.hooks
        self.group = setup.group
        self.accelerator = setup.accelerator
        self.device = setup.accelerator.device
        self.resources = setup.resources
        self.data = setup.data
        self.fingerprint = setup.fingerprint
        self.trainer = setup.trainer
        self.plateau = setup.plateau
        self.trainable = setup.trainable
        self.accountant = setup.accountant
        self.step_time = setup.step_time
        total = self.trainer.total_steps
        self.eval_every = self.options.eval_every or max(1, total // 10)
        self.pacer = (
            StepPacer(self.clock, total_steps=total, estimated_hours=setup.planned_hours)
            if self.clock.simulated and setup.planned_hours
            else None
        )
        self.history = RunHistory(list(setup.prior_evaluations))  # a resumed run keeps its curve
        if self.trainer.position.step == 0:
            self.history.initial_val = self._evaluate(kind_step=0)
            if self.options.early_stopping:
                self.plateau.update(self.history.initial_val)
        self.estimate_power = self.accountant.charged_lap().power_w
        self.timing = SessionTiming(
            taken_up=setup.taken_up,
            ready=(self.clock.now(), time.monotonic()),  # the start-up ends: training begins
            start_step=self.trainer.position.step,
        )

    def run(self, last_loss: float | None) -> RunOutcome:
        trainer = self.trainer
        total = trainer.total_steps
        self._emit("estimate", None, self.history.initial_val, self.estimate_power)
        stretch_steps = 0
        early_stopped = False
        while trainer.position.step < total:
            # the leader reads the caller's control (and paces); every rank acts on its answer
            control = self.group.from_leader(
                self._wait_for_budget(stretch_steps) if self.group.leader else None
            )
            if control is not None:
                return self._interrupted(control, last_loss)
            seconds, last_loss = self._step()
            stretch_steps += 1
            lap = self.accountant.charged_lap(busy_seconds=seconds)
            step = trainer.position.step
            val_loss = None
            if step % self.eval_every == 0 or step == total:
                val_loss = self._evaluate(kind_step=step)
                early_stopped = self._should_stop(step, total, val_loss)
            self._emit("eval" if val_loss is not None else "step", last_loss, val_loss, lap.power_w)
            if early_stopped:
                break
            every = self.options.checkpoint_every
            if every and step % every == 0 and step < total and self.hooks.on_checkpoint:
                self.hooks.on_checkpoint(step, self._checkpoint(last_loss))
                self.timing.checkpoint_step = step
        return self._complete(last_loss, early_stopped)

    def _step(self) -> tuple[float, float]:
        """One optimizer step: its seconds and its loss."""
        trainer = self.trainer
        try:
            result, seconds = self.accelerator.timed(trainer.train_step)
        except Exception as exc:
            if is_oom(exc):
                raise OutOfMemory(
                    f"out of memory at step {trainer.position.step + 1}: {exc}"
                ) from exc
            raise
        self.timing.train_seconds += seconds
        self.step_time = seconds if self.step_time is None else 0.8 * self.step_time + 0.2 * seconds
        self.history.loss_history.append((trainer.position.step, result.loss))
        self.accountant.add_tokens(result.tokens, result.tokens_with_padding)
        return seconds, result.loss

    def _should_stop(self, step: int, total: int, val_loss: float) -> bool:
        """After an evaluation: stop early on a plateau or when the hooks' stop rule says so (the
        leader decides, every rank follows)."""
        early_stopped = False
        if self.options.early_stopping and self.plateau.update(val_loss):
            early_stopped = step < total
            self.history.stop_reason = "plateau" if early_stopped else None
        elif self.hooks.should_stop is not None and step < total:
            reason = self.hooks.should_stop(step, total, list(self.history.evaluations))
            if reason:
                early_stopped, self.history.stop_reason = True, reason
        early_stopped, self.history.stop_reason = self.group.from_leader(
            (early_stopped, self.history.stop_reason)
        )
        return bool(early_stopped)

    def _wait_for_budget(self, stretch_steps: int) -> Control | None:
        control = self.hooks.control or _no_control
        if self.pacer is None:
            return control()
        return self.resources.wait_for_budget(self.pacer, stretch_steps, control)

    def _evaluate(self, kind_step: int) -> float:
        return self.history.record(kind_step, self.trainer.evaluate(self.options.max_eval_examples))

    # ----------------------------------------------------------------- endings
    def _interrupted(self, control: Control, last_loss: float | None) -> RunOutcome:
        pause = control == Control.pause and self.group.leader
        checkpoint = self._checkpoint(last_loss) if pause else None
        status: Literal["paused", "stopped"] = "paused" if control == Control.pause else "stopped"
        return self._outcome(status, last_loss, checkpoint=checkpoint)

    def _complete(self, last_loss: float | None, early_stopped: bool) -> RunOutcome:
        evaluation = self.trainer.evaluate()
        self.accountant.charged_lap()
        metadata = {
            "task": self.request.task.value,
            "base_model": self.request.base_model,
            "labels": self.data.label_names,
            "config": self.config.model_dump(mode="json"),
            "steps": self.trainer.position.step,
            "val_loss": evaluation.loss,
        }
        adapter = (
            self.resources.pack_adapter(self.trainer.model, metadata) if self.group.leader else None
        )
        return self._outcome(
            "completed",
            last_loss,
            evaluation=evaluation,
            early_stopped=early_stopped,
            adapter=adapter,
        )

    def _outcome(
        self,
        status: Literal["completed", "paused", "stopped"],
        last_loss: float | None,
        **extra: Any,
    ) -> RunOutcome:
        trainer = self.trainer
        remaining = trainer.total_steps - trainer.position.step
        return RunOutcome(
            status=status,
            step=trainer.position.step,
            total_steps=trainer.total_steps,
            accounting=self.accountant.accounting(),
            train_loss=last_loss,
            initial_val_loss=self.history.initial_val,
            label_names=self.data.label_names,
            device=str(self.device),
            precision=str(trainer.dtype).removeprefix("torch.") if trainer.dtype else "fp32",
            micro_batch=trainer.micro_batch,
            grad_accum=trainer.grad_accum,
            cache_hit=self.data.cache_hit,
            trainable_parameters=self.trainable,
            estimate_step_time_s=self.step_time,
            estimate_gpu_hours=self._gpu_hours_for(remaining),
            estimate_power_w=self.estimate_power,
            train_seconds=self.timing.train_seconds,
            loss_history=self.history.loss_history,
            eval_history=self.history.eval_history,
            evaluations=self.history.evaluations,
            stop_reason=self.history.stop_reason,
            majority_baseline=self.data.majority_baseline,
            **extra,
        )

    # ----------------------------------------------------------------- reports
    def _gpu_hours_for(self, steps: int) -> float | None:
        if self.step_time is None:
            return None
        return steps * self.step_time * self.site.gpus / 3600.0

    def _emit(
        self,
        kind: Literal["estimate", "step", "eval"],
        train_loss: float | None,
        val_loss: float | None,
        power_w: float,
    ) -> None:
        if self.hooks.on_progress is None:
            return
        trainer = self.trainer
        self.hooks.on_progress(
            Progress(
                kind=kind,
                step=trainer.position.step,
                total_steps=trainer.total_steps,
                train_loss=train_loss,
                val_loss=val_loss,
                learning_rate=trainer.learning_rate,
                power_w=power_w,
                step_time_s=self.step_time,
                estimated_remaining_gpu_hours=self._gpu_hours_for(
                    trainer.total_steps - trainer.position.step
                ),
                accounting=self.accountant.accounting(),
                session=self._session(),
            )
        )

    def _session(self) -> SessionPace:
        timing = self.timing
        (taken_at, taken_wall), (ready_at, ready_wall) = timing.taken_up, timing.ready
        steps = self.trainer.position.step - timing.start_step
        hours = (self.clock.now() - ready_at).total_seconds() / 3600
        return SessionPace(
            started_at=taken_at,
            start_step=timing.start_step,
            startup_s=max((ready_at - taken_at).total_seconds(), 0.0),
            startup_wall_s=max(ready_wall - taken_wall, 0.0),
            steps_per_hour=steps / hours if steps > 0 and hours > 0 else None,
            tokens_per_second=self.accountant.tokens / timing.train_seconds
            if timing.train_seconds > 0
            else None,
            checkpoint_step=timing.checkpoint_step,
        )

    def _checkpoint(self, last_loss: float | None) -> bytes:
        trainer = self.trainer
        checkpoint = Checkpoint(
            fingerprint=self.fingerprint,
            position=trainer.position,
            micro_batch=trainer.micro_batch,
            grad_accum=trainer.grad_accum,
            total_steps=trainer.total_steps,
            adapter=get_peft_model_state_dict(trainer.model),
            optimizer=trainer.optimizer.state_dict(),
            scheduler=trainer.scheduler.state_dict(),
            scaler=trainer.scaler.state_dict() if trainer.scaler else None,
            rng_cpu=torch.get_rng_state(),
            rng_cuda=self.accelerator.rng_states(),
            plateau=self.plateau.history,
            accumulated=self.accountant.carried(),
            last_train_loss=last_loss,
            evaluations=[
                (step, asdict(evaluation)) for step, evaluation in self.history.evaluations
            ],
        )
        return self.resources.write_checkpoint(checkpoint)


def _no_control() -> Control | None:
    return None
