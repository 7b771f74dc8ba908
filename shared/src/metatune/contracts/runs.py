"""Training run contracts: progress, completion, failure and pause."""

from __future__ import annotations

from enum import StrEnum
from itertools import pairwise
from typing import Self

from pydantic import AwareDatetime, Field, model_validator

from .base import Contract, DatacenterName, Event, JobId, OptionalStudyId, StudyId
from .datasets import TaskType
from .jobs import LoraConfig


class HourlyEnergy(Contract):
    """Energy a run spent in one clock hour and the carbon it was charged for it."""

    hour: AwareDatetime = Field(description="start of the (real or simulated) hour, UTC")
    datacenter: str | None = Field(
        None, description="where the energy was spent (a job may migrate)"
    )
    pue: float = Field(1.0, ge=1, description="PUE of that datacenter")
    energy_wh: float = Field(ge=0, description="IT energy above idle in this hour, Wh")
    g_per_kwh: float | None = Field(
        None,
        ge=0,
        description="intensity of the region in this hour (latest forecast); None: no forecast covered it",
    )
    emissions_g: float = Field(0.0, ge=0, description="energy_wh / 1000 x PUE x g_per_kwh, gCO2eq")


class RunAccounting(Contract):
    """What a run spent so far."""

    tokens_seen: int = Field(0, ge=0, description="useful (non-padding) tokens")
    tokens_with_padding: int = Field(0, ge=0, description="tokens including padding")
    energy_wh: float = Field(0.0, ge=0, description="IT energy above idle, Wh")
    emissions_g: float = Field(0.0, ge=0, description="energy x PUE x hourly intensity, gCO2eq")
    gpu_hours: float = Field(0.0, ge=0, description="GPU-hours used (GPUs x hours trained)")
    wall_seconds: float = Field(0.0, ge=0, description="seconds spent training, wall clock")
    hours: list[HourlyEnergy] = Field(
        default_factory=list, description="energy and emissions per clock hour"
    )
    idle_power_w: float | None = Field(
        None, ge=0, description="idle baseline subtracted from the power readings, W"
    )
    power_source: str | None = Field(None, description="nvml, rapl or model (TDP x utilisation)")


MAX_POINTS_PER_EVENT = 1000  # 2 s between progress events at 500 steps/s; ~120 KiB of JSON


class MetricPoint(Contract):
    """One optimizer step a progress event carries besides its own: the agent publishes at most
    every ``agent_progress_interval_s``, and the steps in between ride on the next event."""

    step: int = Field(ge=1, description="optimizer steps done after this one")
    occurred_at: AwareDatetime = Field(description="clock time the step finished")
    train_loss: float | None = Field(
        None, allow_inf_nan=False, description="training loss of the step; None: not finite"
    )
    learning_rate: float = Field(ge=0, allow_inf_nan=False, description="learning rate of the step")
    tokens_seen: int = Field(ge=0, description="useful tokens of the run up to this step")
    tokens_with_padding: int = Field(ge=0, description="tokens including padding up to this step")
    step_time_s: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="mean seconds per optimizer step lately"
    )


class RunProgress(Event):
    job_id: JobId
    datacenter: DatacenterName
    step: int = Field(ge=0, description="optimizer steps done")
    total_steps: int = Field(ge=1, description="optimizer steps planned")
    train_loss: float | None = Field(None, description="training loss at this step")
    val_loss: float | None = Field(None, description="validation loss of the latest evaluation")
    learning_rate: float | None = Field(None, description="current learning rate")
    power_w: float = Field(0.0, ge=0, description="mean power above idle over the last interval, W")
    step_time_s: float | None = Field(
        None, ge=0, description="mean seconds per optimizer step lately"
    )
    estimated_remaining_gpu_hours: float | None = Field(
        None, ge=0, description="GPU-hours to finish, at the current pace"
    )
    accounting: RunAccounting = Field(RunAccounting(), description="what the run spent so far")
    # The session: this start or resume of the job at this datacenter. The scheduler plans the
    # remaining work from these measurements (see the scheduler README); older producers leave them out.
    session_started_at: AwareDatetime | None = Field(
        None, description="clock time the agent took up this start or resume (UTC)"
    )
    session_start_step: int | None = Field(
        None, ge=0, description="optimizer step this session started from (0, or its checkpoint's)"
    )
    startup_s: float | None = Field(
        None,
        ge=0,
        description="clock seconds (simulated seconds under a simulated clock) from taking up the "
        "assignment to the first training step: fetching data and checkpoint, loading the model, "
        "smoke test, restore; what every (re)start costs",
    )
    startup_wall_s: float | None = Field(
        None, ge=0, description="the same start-up in real seconds"
    )
    steps_per_hour: float | None = Field(
        None,
        gt=0,
        description="optimizer steps per clock hour measured since this session's first step "
        "(waits included); None: no step yet",
    )
    tokens_per_second: float | None = Field(
        None, ge=0, description="useful tokens per second of optimizer steps in this session"
    )
    checkpoint_step: int | None = Field(
        None,
        ge=0,
        description="step of the latest checkpoint saved in this session; None: none yet, so a "
        "pause now would save no progress worth its restart",
    )
    points: list[MetricPoint] = Field(
        default_factory=list,
        max_length=MAX_POINTS_PER_EVENT,
        description="the optimizer steps since the previous progress event that this one does not "
        "report itself, oldest first (steps increasing, each before this event's step; times "
        "not going back, none after occurred_at); empty: this event's step only",
    )

    @model_validator(mode="after")
    def _points_in_order(self) -> Self:
        points = self.points
        if points:
            for before, after in pairwise(points):
                if after.step <= before.step or after.occurred_at < before.occurred_at:
                    raise ValueError(
                        f"points: step {after.step} follows step {before.step}; steps must "
                        "increase and times must not go back"
                    )
            last = points[-1]
            if last.step >= self.step:
                raise ValueError(
                    f"points: step {last.step} is not before this event's step {self.step}"
                )
            if last.occurred_at > self.occurred_at:
                raise ValueError(f"points: step {last.step} is later than occurred_at")
        return self


class RunMetrics(Contract):
    """Held-out metrics of a finished run."""

    val_loss: float = Field(description="validation loss")
    accuracy: float | None = Field(
        None, ge=0, le=1, description="validation accuracy (classification)"
    )
    macro_f1: float | None = Field(
        None, ge=0, le=1, description="validation macro-F1 (classification)"
    )
    perplexity: float | None = Field(None, ge=0, description="validation perplexity (causal LM)")


class CurvePoint(Contract):
    """One evaluation of a run. ``fraction`` = step / planned steps, so curves of different budgets align."""

    step: int = Field(ge=0, description="optimizer step of the evaluation")
    fraction: float = Field(ge=0, le=1, description="step / planned steps")
    val_loss: float | None = Field(None, description="validation loss")
    metric: float | None = Field(
        None, description="the run's objective at this evaluation (higher is better)"
    )
    train_loss: float | None = Field(None, description="training loss at that step")


class Hardware(Contract):
    """What a run trained on."""

    device: str = Field(description="cpu, cuda, ...")
    gpu_model: str | None = Field(None, description="GPU model, where one was used")
    gpu_count: int = Field(0, ge=0, description="GPUs used")
    cpu_model: str | None = Field(None, description="CPU model")
    precision: str | None = Field(None, description="fp32, bfloat16, float16")


class RunCompleted(Event):
    """A finished run. The optional fields make it a whole knowledge-base row (the recommender's
    flywheel); producers that leave them out still validate."""

    job_id: JobId
    study_id: StudyId
    datacenter: DatacenterName
    config: LoraConfig = Field(description="the configuration trained")
    metrics: RunMetrics = Field(description="held-out metrics of the final adapter")
    steps: int = Field(ge=0, description="optimizer steps trained")
    early_stopped: bool = Field(False, description="the run stopped before planned_steps")
    stop_reason: str | None = Field(
        None, description="why an early-stopped run stopped (plateau, the curve stopper)"
    )
    adapter_key: str | None = Field(
        None,
        description="key of the trained LoRA adapter (a tar of the PEFT directory) in the object store bucket adapters",
    )
    accounting: RunAccounting = Field(description="tokens, energy and emissions of the whole run")
    base_model: str | None = Field(None, description="the base model fine-tuned")
    task: TaskType | None = Field(None, description="the study's task")
    planned_steps: int | None = Field(
        None, ge=0, description="steps the run would have taken without an early stop"
    )
    curve: list[CurvePoint] = Field(
        default_factory=list, description="periodic evaluations, step 0 first"
    )
    majority_baseline: float | None = Field(
        None,
        ge=0,
        le=1,
        description="accuracy of always predicting the training set's most common label",
    )
    hardware: Hardware | None = Field(None, description="what it trained on")
    dataset_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the data trained on, verified against the submission's; the "
        "knowledge base takes the run only when it equals the profiled dataset's",
    )


class FailureReason(StrEnum):
    unknown_base_model = "unknown_base_model"
    invalid_config = "invalid_config"
    dataset_missing = "dataset_missing"
    dataset_not_allowed = (
        "dataset_not_allowed"  # a path outside the data roots, a URL to a non-public address
    )
    dataset_digest_mismatch = (
        "dataset_digest_mismatch"  # the dataset's sha256 is not the submitted one: never trained
    )
    empty_split = "empty_split"
    smoke_test_failed = "smoke_test_failed"
    out_of_memory = "out_of_memory"
    wrong_datacenter = "wrong_datacenter"
    stopped = "stopped"  # a stop assignment ended the run
    internal = "internal"


class RunFailed(Event):
    job_id: JobId
    study_id: OptionalStudyId = None
    datacenter: DatacenterName
    reason: FailureReason = Field(description="typed cause")
    message: str = Field(description="human-readable cause")
    accounting: RunAccounting = Field(
        RunAccounting(), description="what the run spent before it failed"
    )
    config: LoraConfig | None = Field(
        None, description="the configuration that failed, where known"
    )
    base_model: str | None = Field(None, description="the base model, where known")
    task: TaskType | None = Field(None, description="the study's task, where known")


class RunPaused(Event):
    job_id: JobId
    study_id: StudyId
    datacenter: DatacenterName
    step: int = Field(ge=0, description="optimizer steps done when it paused")
    checkpoint_key: str = Field(
        description="key in the object store bucket checkpoints to resume from"
    )
    accounting: RunAccounting = Field(RunAccounting(), description="what the run spent so far")
