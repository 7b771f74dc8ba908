"""Trial (job) contracts: what the recommender asks the scheduler to run."""

from __future__ import annotations

from enum import StrEnum
from uuid import UUID

from pydantic import AwareDatetime, Field, model_validator

from .base import Contract, Event
from .datasets import StudySpec


class LrSchedule(StrEnum):
    linear = "linear"
    cosine = "cosine"
    constant = "constant"


class LoraConfig(Contract):
    """One LoRA fine-tuning configuration; ranges are what a run can sensibly use."""

    rank: int = Field(8, ge=1, le=1024)
    alpha: float = Field(16.0, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | None = Field(None, description="None: the base model's attention projections")
    learning_rate: float = Field(3e-4, gt=0, le=1)
    lr_schedule: LrSchedule = LrSchedule.linear
    warmup_ratio: float = Field(0.06, ge=0, le=1)
    weight_decay: float = Field(0.0, ge=0, le=1)
    batch_size: int = Field(16, ge=1, le=4096)
    grad_accum_steps: int = Field(1, ge=1, le=1024)
    epochs: float | None = Field(1.0, gt=0)
    max_steps: int | None = Field(None, ge=1)
    max_seq_length: int = Field(128, ge=8, le=32768)
    seed: int = 13

    @model_validator(mode="after")
    def _has_length(self) -> LoraConfig:
        if self.epochs is None and self.max_steps is None:
            raise ValueError("set epochs or max_steps")
        return self


class JobRequested(Event):
    job_id: UUID
    study_id: UUID
    trial_index: int = Field(ge=0)
    spec: StudySpec
    config: LoraConfig
    predicted_loss: float | None = None
    predicted_loss_std: float | None = Field(None, ge=0)
    gpus: int = Field(1, ge=1, le=64, description="GPUs the job occupies while running")
    estimated_gpu_hours: float = Field(gt=0, description="GPU-hours to finish (all GPUs together)")
    power_kw: float = Field(gt=0, description="IT power draw of the whole job while running, kW")
    deadline: AwareDatetime
    earliest_start: AwareDatetime | None = Field(
        None, description="not to run before this (its data lands later): a job announced ahead lets the "
        "scheduler keep clean room for it (see the scheduler README)",
    )

    @model_validator(mode="after")
    def _starts_before_deadline(self) -> JobRequested:
        if self.earliest_start is not None and self.earliest_start >= self.deadline:
            raise ValueError("earliest_start must be before the deadline")
        return self


class JobInfeasible(Event):
    job_id: UUID
    study_id: UUID | None = None
    reason: str
    earliest_finish: AwareDatetime | None = Field(None, description="earliest finish the scheduler can offer")


class JobCancelled(Event):
    """A user or another system withdraws a requested job: the scheduler stops it where it runs
    (a ``stop`` assignment), drops it from the plan and never starts it again."""

    job_id: UUID
    study_id: UUID | None = None
    reason: str = Field("cancelled by the user", min_length=1, max_length=2000)
