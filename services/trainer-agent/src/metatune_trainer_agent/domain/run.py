"""One training run from start (or checkpoint) to completion, pause or stop.

:class:`TrainingRun`, behind :func:`metatune_trainer_agent.adapters.training.run_training` (the
single code path of the agent and of ``metatune train``): load and tokenize the data (cached),
build the LoRA model, smoke-test it (probing the micro-batch on GPU), publish a measured time
estimate, then step, evaluate, early-stop, checkpoint and account energy and carbon until the
run ends or is told to pause. Files, models, hardware and waiting are reached through the
:class:`~.resources.RunResources` port.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

import torch
from peft import get_peft_model_state_dict, set_peft_model_state_dict

from metatune.clock import Clock
from metatune.contracts import RunAccounting, TaskType

from .batching import Collator
from .carbon import CarbonLedger, IntensityLookup
from .checkpoint import Accumulated, Checkpoint, fingerprint
from .distributed import Group
from .energy import DEFAULT_WATTS_PER_CORE, EnergyMeter, Lap
from .errors import InvalidTrainingConfig, OutOfMemory, SmokeTestFailed, TrainingDatasetNotFound
from .model import count_parameters, device_for
from .pacing import StepPacer
from .plateau import PlateauDetector
from .request import TrainingRequest
from .resources import RunResources
from .trainer import Evaluation, Trainer, is_oom

PACER_POLL_S = 0.05


class Control(StrEnum):
    pause = "pause"
    stop = "stop"


@dataclass(frozen=True)
class Site:
    """Where the run executes: it decides power, PUE and GPU-hours."""

    datacenter: str = "local"
    pue: float = 1.0
    gpus: int = 1
    gpu_power_w: float = 300.0
    watts_per_core: float = DEFAULT_WATTS_PER_CORE
    idle_seconds: float = 1.0  # how long the idle baseline is measured


@dataclass(frozen=True)
class Progress:
    kind: Literal["estimate", "step", "eval"]
    step: int
    total_steps: int
    train_loss: float | None
    val_loss: float | None
    learning_rate: float
    power_w: float
    step_time_s: float | None
    estimated_remaining_gpu_hours: float | None
    accounting: RunAccounting
    session: SessionPace | None = None


@dataclass(frozen=True)
class SessionPace:
    """What this start or resume cost and how fast it trains: the scheduler plans the rest of the
    job from it (remaining steps at this rate, a start-up per restart, no pause before a checkpoint)."""

    started_at: datetime  # clock time the assignment was taken up
    start_step: int  # the step it started from
    startup_s: float  # clock seconds from taking it up to the first step (simulated under a simulated clock)
    startup_wall_s: float  # the same in real seconds
    steps_per_hour: float | None  # steps per clock hour since the first step; None before one
    tokens_per_second: float | None  # useful tokens per second of optimizer steps
    checkpoint_step: int | None  # the latest checkpoint handed over in this session


@dataclass
class RunHooks:
    """How the caller watches and steers a run (called from the training thread)."""

    on_progress: Callable[[Progress], None] | None = None
    on_checkpoint: Callable[[int, bytes], None] | None = None
    control: Callable[[], Control | None] | None = None
    # Called after each periodic evaluation with (step, total_steps, evaluations so far); a returned
    # string stops the run early with that reason (the learning-curve predictor plugs in here).
    should_stop: Callable[[int, int, list[tuple[int, Evaluation]]], str | None] | None = None


@dataclass
class RunOutcome:
    status: Literal["completed", "paused", "stopped"]
    step: int
    total_steps: int
    accounting: RunAccounting
    evaluation: Evaluation | None = None
    early_stopped: bool = False
    checkpoint: bytes | None = None
    adapter: bytes | None = None
    train_loss: float | None = None
    initial_val_loss: float | None = None
    label_names: list[str] = field(default_factory=list)
    device: str = "cpu"
    precision: str = "fp32"
    micro_batch: int = 0
    grad_accum: int = 0
    cache_hit: bool = False
    trainable_parameters: int = 0
    estimate_step_time_s: float | None = None
    estimate_gpu_hours: float | None = None
    estimate_power_w: float | None = None
    train_seconds: float = (
        0.0  # time inside optimizer steps in this session (no loading, evaluation, waiting)
    )
    loss_history: list[tuple[int, float]] = field(default_factory=list)
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    evaluations: list[tuple[int, Evaluation]] = field(
        default_factory=list
    )  # periodic evaluations, step 0 first
    stop_reason: str | None = (
        None  # why an early-stopped run stopped: "plateau" or the stopper's reason
    )
    majority_baseline: float | None = (
        None  # accuracy of always predicting the most common train label (val split)
    )


def total_steps_for(request: TrainingRequest, n_train: int) -> int:
    config = request.config
    if config.max_steps is not None:
        return config.max_steps
    effective = config.batch_size * config.grad_accum_steps
    return max(1, math.ceil((config.epochs or 1.0) * n_train / effective))


class TrainingRun:
    """One run's decisions: it reaches files, models and hardware only through ``resources``."""

    def __init__(
        self,
        request: TrainingRequest,
        site: Site,
        clock: Clock,
        intensity: IntensityLookup,
        hooks: RunHooks,
        planned_hours: float | None,
        group: Group,
        resources: RunResources,
    ) -> None:
        self.resources = resources
        self.request = request
        self.group = group
        self.options = request.options
        self.config = request.config
        self.site = site
        self.clock = clock
        self.intensity = intensity
        self.hooks = hooks
        self.planned_hours = planned_hours
        self.device = device_for(self.options.device)
        if group.distributed and self.device.type == "cuda":
            self.device = torch.device("cuda", group.local_rank)  # one device per process
            torch.cuda.set_device(self.device)
        self.causal_lm = request.task == TaskType.causal_lm

    # ----------------------------------------------------------------- set-up
    def execute(
        self, resume_from: bytes | None, taken_up: tuple[datetime, float] | None = None
    ) -> RunOutcome:
        self.taken_up = taken_up or (self.clock.now(), time.monotonic())
        self.checkpoint_step: int | None = None
        if not self.resources.dataset_exists(self.request.dataset):
            raise TrainingDatasetNotFound(f"dataset {self.request.dataset} does not exist")
        if self.options.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        if self.group.world > self.config.batch_size:
            raise InvalidTrainingConfig(
                f"a batch of {self.config.batch_size} cannot be split across {self.group.world} "
                "devices: each needs at least one example per micro-batch"
            )
        self.group.join(self.device)
        self.meter = EnergyMeter(
            self.resources.energy_counter(
                self.device,
                gpu_power_w=self.site.gpu_power_w,
                watts_per_core=self.site.watts_per_core,
            )
        )
        self.meter.measure_idle(self.site.idle_seconds, self.resources.sleep)
        self.started = time.monotonic()
        self.lap_at = self.clock.now()
        self.session_tokens = 0
        self.session_padded = 0

        tokenizer, source = self.resources.load_tokenizer(self.request.base_model)
        data = self.resources.encode(self.request, tokenizer)
        self.data = data
        total_steps = total_steps_for(self.request, len(data.train))
        self.fingerprint = fingerprint(
            task=self.request.task,
            base_model=self.request.base_model,
            config=self.config.model_dump(mode="json"),
            n_train=len(data.train),
            n_val=len(data.val),
            labels=data.label_names,
            group_by_length=self.options.group_by_length,
        )
        checkpoint = (
            self.resources.read_checkpoint(resume_from, expect_fingerprint=self.fingerprint)
            if resume_from
            else None
        )
        self.accumulated = checkpoint.accumulated if checkpoint else Accumulated()
        self.ledger = CarbonLedger.from_state(
            self.accumulated.ledger, self.site.datacenter, self.site.pue
        )

        torch.manual_seed(
            self.config.seed
        )  # the fresh heads and LoRA matrices start the same everywhere
        model = self.resources.load_model(
            source,
            self.request.task,
            self.config,
            num_labels=len(data.label_names),
            pad_token_id=tokenizer.pad_token_id,
        ).to(self.device)
        self.trainable, _ = count_parameters(model)
        multiple = self.options.pad_to_multiple_of or (8 if self.device.type == "cuda" else 1)
        collator = Collator(
            pad_id=tokenizer.pad_token_id,
            max_length=self.config.max_seq_length,
            dynamic=self.options.dynamic_padding,
            multiple_of=multiple,
            causal_lm=self.causal_lm,
        )
        self.trainer = Trainer(
            model,
            config=self.config,
            train=data.train,
            val=data.val,
            collator=collator,
            device=self.device,
            precision=self.options.precision,
            micro_batch=checkpoint.micro_batch if checkpoint else self.config.batch_size,
            grad_accum=checkpoint.grad_accum if checkpoint else self.config.grad_accum_steps,
            group_by_length=self.options.group_by_length,
            total_steps=checkpoint.total_steps if checkpoint else total_steps,
            causal_lm=self.causal_lm,
            num_labels=len(data.label_names),
            group=self.group,
        )
        self.plateau = PlateauDetector(
            patience=self.options.patience,
            window=self.options.plateau_window,
            min_rel_improvement=self.options.min_rel_improvement,
            history=list(checkpoint.plateau) if checkpoint else [],
        )
        probe = self.options.probe_batch_size
        if probe is None:  # across processes the micro-batch is fixed: every rank steps alike
            probe = self.device.type == "cuda" and checkpoint is None and not self.group.distributed
        self.step_time = self._smoke_test(probe) if self.options.smoke_test else None
        self.prior_evaluations = (
            [(step, Evaluation.from_record(values)) for step, values in checkpoint.evaluations]
            if checkpoint
            else []
        )
        if checkpoint:
            self._restore(checkpoint)
        else:
            torch.manual_seed(self.config.seed)  # the smoke test's dropout draws leave no trace
        return self._loop(checkpoint.last_train_loss if checkpoint else None)

    def _smoke_test(self, probe: bool) -> float:
        """Two forward/backward passes (the longest batch, then a typical one); returns a step-time estimate."""
        trainer = self.trainer
        effective = trainer.micro_batch * trainer.grad_accum
        while True:
            try:
                trainer.trial_pass(trainer.plan.longest(1)[0])
                break
            except Exception as exc:
                if not is_oom(exc):
                    raise SmokeTestFailed(
                        f"smoke test failed on the longest batch: {type(exc).__name__}: {exc}"
                    ) from exc
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                if not probe or trainer.micro_batch == 1:
                    raise OutOfMemory(
                        f"a micro-batch of {trainer.micro_batch} x {self.config.max_seq_length} tokens does not fit "
                        f"on {self.device}" + ("" if probe else " (batch-size probing is off)")
                    ) from exc
                micro = trainer.micro_batch // 2
                trainer.resize(micro, math.ceil(effective / micro))
        try:
            typical = trainer.plan.epoch(0)[len(trainer.plan) // 2]
            self._sync()
            started = time.perf_counter()
            trainer.trial_pass(typical)
            self._sync()
            seconds = time.perf_counter() - started
        except Exception as exc:
            raise SmokeTestFailed(f"smoke test failed: {type(exc).__name__}: {exc}") from exc
        return seconds * trainer.grad_accum

    def _restore(self, checkpoint: Checkpoint) -> None:
        trainer = self.trainer
        set_peft_model_state_dict(
            trainer.model, {k: v.to(self.device) for k, v in checkpoint.adapter.items()}
        )
        trainer.optimizer.load_state_dict(checkpoint.optimizer)
        trainer.scheduler.load_state_dict(checkpoint.scheduler)
        if trainer.scaler is not None and checkpoint.scaler:
            trainer.scaler.load_state_dict(checkpoint.scaler)
        trainer.set_position(checkpoint.position)
        torch.set_rng_state(checkpoint.rng_cpu)
        if self.device.type == "cuda" and checkpoint.rng_cuda:
            torch.cuda.set_rng_state(checkpoint.rng_cuda[0], self.device)

    # ----------------------------------------------------------------- the loop
    def _loop(self, last_loss: float | None) -> RunOutcome:
        trainer = self.trainer
        total = trainer.total_steps
        eval_every = self.options.eval_every or max(1, total // 10)
        pacer = None
        if self.clock.simulated and self.planned_hours:
            pacer = StepPacer(self.clock, total_steps=total, estimated_hours=self.planned_hours)
        self.loss_history: list[tuple[int, float]] = []
        self.eval_history: list[tuple[int, float]] = []
        self.evaluations: list[tuple[int, Evaluation]] = list(
            self.prior_evaluations
        )  # a resumed run keeps its curve
        self.stop_reason: str | None = None
        self.initial_val: float | None = None
        self.estimate_power: float | None = None
        if trainer.position.step == 0:
            self.initial_val = self._evaluate(kind_step=0)
            if self.options.early_stopping:
                self.plateau.update(self.initial_val)
        lap = self._lap()
        self._charge(lap.energy_wh)
        self.estimate_power = lap.power_w
        self.ready = (self.clock.now(), time.monotonic())  # the start-up ends: training begins
        self.start_step = trainer.position.step
        self.train_seconds = 0.0
        self._emit("estimate", None, self.initial_val, lap.power_w)

        stretch_steps = 0
        early_stopped = False
        while trainer.position.step < total:
            # the leader reads the caller's control (and paces); every rank acts on its answer
            control = self.group.from_leader(
                self._wait_for_budget(pacer, stretch_steps) if self.group.leader else None
            )
            if control is not None:
                return self._interrupted(control, last_loss)
            started = time.perf_counter()
            try:
                result = trainer.train_step()
            except Exception as exc:
                if is_oom(exc):
                    raise OutOfMemory(
                        f"out of memory at step {trainer.position.step + 1}: {exc}"
                    ) from exc
                raise
            self._sync()
            seconds = time.perf_counter() - started
            self.train_seconds += seconds
            self.step_time = (
                seconds if self.step_time is None else 0.8 * self.step_time + 0.2 * seconds
            )
            stretch_steps += 1
            last_loss = result.loss
            self.loss_history.append((trainer.position.step, result.loss))
            self.session_tokens += result.tokens
            self.session_padded += result.tokens_with_padding
            lap = self._lap(busy_seconds=seconds)
            self._charge(lap.energy_wh)
            step = trainer.position.step
            val_loss = None
            if step % eval_every == 0 or step == total:
                val_loss = self._evaluate(kind_step=step)
                if self.options.early_stopping and self.plateau.update(val_loss):
                    early_stopped = step < total
                    self.stop_reason = "plateau" if early_stopped else None
                elif self.hooks.should_stop is not None and step < total:
                    reason = self.hooks.should_stop(step, total, list(self.evaluations))
                    if reason:
                        early_stopped, self.stop_reason = True, reason
                early_stopped, self.stop_reason = self.group.from_leader(
                    (early_stopped, self.stop_reason)
                )
            self._emit("eval" if val_loss is not None else "step", last_loss, val_loss, lap.power_w)
            if early_stopped:
                break
            every = self.options.checkpoint_every
            if every and step % every == 0 and step < total and self.hooks.on_checkpoint:
                self.hooks.on_checkpoint(step, self._checkpoint(last_loss))
                self.checkpoint_step = step
        return self._complete(last_loss, early_stopped)

    def _wait_for_budget(self, pacer: StepPacer | None, stretch_steps: int) -> Control | None:
        while True:
            control = self.hooks.control() if self.hooks.control else None
            if control is not None or pacer is None or pacer.may_step(stretch_steps):
                return control
            self.resources.sleep(
                min(max(pacer.wait_seconds(), PACER_POLL_S), 0.5)
            )  # short naps: a pause must not wait an hour

    def _evaluate(self, kind_step: int) -> float:
        evaluation = self.trainer.evaluate(self.options.max_eval_examples)
        self.eval_history.append((kind_step, evaluation.loss))
        self.evaluations.append((kind_step, evaluation))
        return evaluation.loss

    # ----------------------------------------------------------------- endings
    def _interrupted(self, control: Control, last_loss: float | None) -> RunOutcome:
        pause = control == Control.pause and self.group.leader
        checkpoint = self._checkpoint(last_loss) if pause else None
        status: Literal["paused", "stopped"] = "paused" if control == Control.pause else "stopped"
        return self._outcome(status, last_loss, checkpoint=checkpoint)

    def _complete(self, last_loss: float | None, early_stopped: bool) -> RunOutcome:
        evaluation = self.trainer.evaluate()
        lap = self._lap()
        self._charge(lap.energy_wh)
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
            accounting=self.accounting(),
            train_loss=last_loss,
            initial_val_loss=self.initial_val,
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
            train_seconds=self.train_seconds,
            loss_history=self.loss_history,
            eval_history=self.eval_history,
            evaluations=self.evaluations,
            stop_reason=self.stop_reason,
            majority_baseline=self.data.majority_baseline,
            **extra,
        )

    # ----------------------------------------------------------------- accounting
    def _lap(self, busy_seconds: float | None = None) -> Lap:
        """This process's lap; across processes, every device's energy and power together (a
        machine-wide counter, RAPL, is read by the leader alone)."""
        lap = self.meter.lap(busy_seconds=busy_seconds)
        if not self.group.distributed:
            return lap
        counted = self.group.leader or not self.meter.machine_wide
        energy_wh, power_w = self.group.total(
            [lap.energy_wh, lap.power_w] if counted else [0.0, 0.0]
        )
        return Lap(seconds=lap.seconds, energy_wh=energy_wh, power_w=power_w)

    def _charge(self, energy_wh: float) -> None:
        now = self.clock.now()
        self.ledger.add(self.lap_at, now, energy_wh, self.intensity)
        self.lap_at = now

    def _session_seconds(self) -> float:
        return time.monotonic() - self.started

    def accounting(self) -> RunAccounting:
        self.ledger.reprice(self.intensity)
        wall = self.accumulated.wall_seconds + self._session_seconds()
        return RunAccounting(
            tokens_seen=self.accumulated.tokens + self.session_tokens,
            tokens_with_padding=self.accumulated.tokens_with_padding + self.session_padded,
            energy_wh=self.ledger.energy_wh,
            emissions_g=self.ledger.emissions_g,
            gpu_hours=self.accumulated.gpu_hours
            + self._session_seconds() * self.site.gpus / 3600.0,
            wall_seconds=wall,
            hours=self.ledger.hours(),
            idle_power_w=self.meter.idle_w,
            power_source=self.meter.source,
        )

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
                accounting=self.accounting(),
                session=self._session(),
            )
        )

    def _session(self) -> SessionPace:
        (taken_at, taken_wall), (ready_at, ready_wall) = self.taken_up, self.ready
        steps = self.trainer.position.step - self.start_step
        hours = (self.clock.now() - ready_at).total_seconds() / 3600
        return SessionPace(
            started_at=taken_at,
            start_step=self.start_step,
            startup_s=max((ready_at - taken_at).total_seconds(), 0.0),
            startup_wall_s=max(ready_wall - taken_wall, 0.0),
            steps_per_hour=steps / hours if steps > 0 and hours > 0 else None,
            tokens_per_second=self.session_tokens / self.train_seconds
            if self.train_seconds > 0
            else None,
            checkpoint_step=self.checkpoint_step,
        )

    def _checkpoint(self, last_loss: float | None) -> bytes:
        trainer = self.trainer
        accounting = self.accounting()
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
            rng_cuda=[torch.cuda.get_rng_state(self.device)] if self.device.type == "cuda" else [],
            plateau=self.plateau.history,
            accumulated=Accumulated(
                tokens=accounting.tokens_seen,
                tokens_with_padding=accounting.tokens_with_padding,
                wall_seconds=accounting.wall_seconds,
                gpu_hours=accounting.gpu_hours,
                ledger=self.ledger.to_state(),
            ),
            last_train_loss=last_loss,
            evaluations=[(step, asdict(evaluation)) for step, evaluation in self.evaluations],
        )
        return self.resources.write_checkpoint(checkpoint)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
