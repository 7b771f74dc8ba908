"""One training run from start (or checkpoint) to completion, pause or stop.

:class:`TrainingRun`, behind :func:`metatune_trainer_agent.adapters.training.run_training` (the
single code path of the agent and of ``metatune train``), sets the run up: load and tokenize the
data (cached), build the LoRA model, smoke-test it (probing the micro-batch on GPU), restore a
checkpoint; :class:`~.run_loop.TrainingLoop` then publishes a measured time estimate, steps,
evaluates, early-stops, checkpoints and accounts energy and carbon
(:class:`~.run_accounting.RunAccountant`) until the run ends or is told to pause. Files, models,
hardware and waiting are reached through the :class:`~.resources.RunResources` port.
"""

from __future__ import annotations

import math
import time
from datetime import datetime

import torch
from peft import set_peft_model_state_dict
from torch import nn

from metatune.clock import Clock
from metatune.contracts import TaskType

from .batching import Collator
from .carbon import IntensityLookup
from .checkpoint import Accumulated, Checkpoint, fingerprint
from .device import Accelerator
from .distributed import Group
from .encoding import EncodedDataset
from .energy import EnergyMeter
from .errors import InvalidTrainingConfig, OutOfMemory, SmokeTestFailed, TrainingDatasetNotFound
from .model import count_parameters
from .plateau import PlateauDetector
from .request import TrainingRequest
from .resources import RunResources
from .run_accounting import RunAccountant
from .run_loop import LoopSetup, TrainingLoop
from .run_types import Control, Progress, RunHooks, RunOutcome, SessionPace, Site
from .trainer import Evaluation, Trainer, is_oom

__all__ = [
    "Control",
    "Progress",
    "RunHooks",
    "RunOutcome",
    "SessionPace",
    "Site",
    "TrainingRun",
    "total_steps_for",
]


def check_split(batch_size: int, devices: int) -> None:
    """Refuse a batch that ``devices`` data-parallel processes cannot share (one example each at
    least per micro-batch): checked before the processes start and again in each."""
    if devices > batch_size:
        raise InvalidTrainingConfig(
            f"a batch of {batch_size} cannot be split across {devices} "
            "devices: each needs at least one example per micro-batch"
        )


def total_steps_for(request: TrainingRequest, n_train: int) -> int:
    config = request.config
    if config.max_steps is not None:
        return config.max_steps
    effective = config.batch_size * config.grad_accum_steps
    return max(1, math.ceil((config.epochs or 1.0) * n_train / effective))


class TrainingRun:
    """One run's set-up: it reaches files, models and hardware only through ``resources``, then
    hands a :class:`~.run_loop.LoopSetup` to the loop."""

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
        self.accelerator = resources.open_device(
            self.options.device, group.local_rank if group.distributed else None
        )
        self.device = self.accelerator.device
        self.causal_lm = request.task == TaskType.causal_lm

    def execute(
        self, resume_from: bytes | None, taken_up: tuple[datetime, float] | None = None
    ) -> RunOutcome:
        taken_up = taken_up or (self.clock.now(), time.monotonic())
        self._check()
        meter = self._idle_meter()
        started, lap_at = time.monotonic(), self.clock.now()  # the start-up is charged too
        tokenizer, source = self.resources.load_tokenizer(self.request.base_model)
        data = self.resources.encode(self.request, tokenizer)
        run_fingerprint = self._fingerprint(data)
        checkpoint = (
            self.resources.read_checkpoint(resume_from, expect_fingerprint=run_fingerprint)
            if resume_from
            else None
        )
        accountant = RunAccountant(
            meter,
            checkpoint.accumulated if checkpoint else Accumulated(),
            self.site,
            self.clock,
            self.intensity,
            self.group,
            started=started,
            lap_at=lap_at,
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
        trainable, _ = count_parameters(model)
        trainer = self._trainer(model, tokenizer.pad_token_id, data, checkpoint)
        plateau = PlateauDetector(
            patience=self.options.patience,
            window=self.options.plateau_window,
            min_rel_improvement=self.options.min_rel_improvement,
            history=list(checkpoint.plateau) if checkpoint else [],
        )
        step_time = self._smoke_test(trainer, resumed=checkpoint is not None)
        prior_evaluations = (
            [(step, Evaluation.from_record(values)) for step, values in checkpoint.evaluations]
            if checkpoint
            else []
        )
        if checkpoint:
            restore(trainer, checkpoint, self.accelerator)
        else:
            torch.manual_seed(self.config.seed)  # the smoke test's dropout draws leave no trace
        loop = TrainingLoop(
            LoopSetup(
                request=self.request,
                site=self.site,
                clock=self.clock,
                hooks=self.hooks,
                planned_hours=self.planned_hours,
                group=self.group,
                accelerator=self.accelerator,
                resources=self.resources,
                data=data,
                fingerprint=run_fingerprint,
                trainer=trainer,
                plateau=plateau,
                trainable=trainable,
                accountant=accountant,
                taken_up=taken_up,
                step_time=step_time,
                prior_evaluations=prior_evaluations,
            )
        )
        return loop.run(checkpoint.last_train_loss if checkpoint else None)

    def _check(self) -> None:
        """Refuse what cannot run, before any compute: no dataset, a batch smaller than the group."""
        if not self.resources.dataset_exists(self.request.dataset):
            raise TrainingDatasetNotFound(f"dataset {self.request.dataset} does not exist")
        if self.options.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        check_split(self.config.batch_size, self.group.world)

    def _fingerprint(self, data: EncodedDataset) -> str:
        """What a checkpoint must match to continue this run."""
        return fingerprint(
            task=self.request.task,
            base_model=self.request.base_model,
            config=self.config.model_dump(mode="json"),
            n_train=len(data.train),
            n_val=len(data.val),
            labels=data.label_names,
            group_by_length=self.options.group_by_length,
        )

    def _idle_meter(self) -> EnergyMeter:
        """The best energy meter for the device, its idle baseline measured."""
        counter = self.resources.energy_counter(
            self.device,
            gpu_power_w=self.site.gpu_power_w,
            watts_per_core=self.site.watts_per_core,
        )
        return EnergyMeter(
            counter, idle_w=self.resources.idle_watts(counter, self.site.idle_seconds)
        )

    def _trainer(
        self, model: nn.Module, pad_id: int, data: EncodedDataset, checkpoint: Checkpoint | None
    ) -> Trainer:
        multiple = self.options.pad_to_multiple_of or (8 if self.device.type == "cuda" else 1)
        collator = Collator(
            pad_id=pad_id,
            max_length=self.config.max_seq_length,
            dynamic=self.options.dynamic_padding,
            multiple_of=multiple,
            causal_lm=self.causal_lm,
        )
        return Trainer(
            model,
            config=self.config,
            train=data.train,
            val=data.val,
            collator=collator,
            accelerator=self.accelerator,
            precision=self.options.precision,
            micro_batch=checkpoint.micro_batch if checkpoint else self.config.batch_size,
            grad_accum=checkpoint.grad_accum if checkpoint else self.config.grad_accum_steps,
            group_by_length=self.options.group_by_length,
            total_steps=checkpoint.total_steps
            if checkpoint
            else total_steps_for(self.request, len(data.train)),
            causal_lm=self.causal_lm,
            num_labels=len(data.label_names),
            group=self.group,
        )

    def _smoke_test(self, trainer: Trainer, *, resumed: bool) -> float | None:
        if not self.options.smoke_test:
            return None
        probe = self.options.probe_batch_size
        if probe is None:  # across processes the micro-batch is fixed: every rank steps alike
            probe = self.device.type == "cuda" and not resumed and not self.group.distributed
        return smoke_test(trainer, self.accelerator, self.config.max_seq_length, probe)


def smoke_test(
    trainer: Trainer, accelerator: Accelerator, max_seq_length: int, probe: bool
) -> float:
    """Two forward/backward passes (the longest batch, then a typical one); returns a step-time estimate."""
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
            accelerator.release_memory()
            if not probe or trainer.micro_batch == 1:
                raise OutOfMemory(
                    f"a micro-batch of {trainer.micro_batch} x {max_seq_length} tokens does not fit "
                    f"on {accelerator.device}" + ("" if probe else " (batch-size probing is off)")
                ) from exc
            micro = trainer.micro_batch // 2
            trainer.resize(micro, math.ceil(effective / micro))
    try:
        typical = trainer.plan.epoch(0)[len(trainer.plan) // 2]
        _, seconds = accelerator.timed(lambda: trainer.trial_pass(typical))
    except Exception as exc:
        raise SmokeTestFailed(f"smoke test failed: {type(exc).__name__}: {exc}") from exc
    return seconds * trainer.grad_accum


def restore(trainer: Trainer, checkpoint: Checkpoint, accelerator: Accelerator) -> None:
    """Continue ``checkpoint`` exactly: adapter, optimizer, scheduler, scaler, position, RNGs."""
    set_peft_model_state_dict(
        trainer.model, {k: v.to(accelerator.device) for k, v in checkpoint.adapter.items()}
    )
    trainer.optimizer.load_state_dict(checkpoint.optimizer)
    trainer.scheduler.load_state_dict(checkpoint.scheduler)
    if trainer.scaler is not None and checkpoint.scaler:
        trainer.scaler.load_state_dict(checkpoint.scaler)
    trainer.set_position(checkpoint.position)
    torch.set_rng_state(checkpoint.rng_cpu)
    accelerator.restore_rng(checkpoint.rng_cuda)
