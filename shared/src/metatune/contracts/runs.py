"""Training run contracts: progress, completion, failure and pause."""

from __future__ import annotations

from enum import StrEnum
from uuid import UUID

from pydantic import Field

from .base import Contract, Event
from .jobs import LoraConfig


class RunAccounting(Contract):
    """What a run spent so far."""

    tokens_seen: int = Field(0, ge=0, description="useful (non-padding) tokens")
    tokens_with_padding: int = Field(0, ge=0, description="tokens including padding")
    energy_wh: float = Field(0.0, ge=0, description="IT energy above idle, Wh")
    emissions_g: float = Field(0.0, ge=0, description="energy x PUE x hourly intensity, gCO2eq")
    gpu_hours: float = Field(0.0, ge=0)
    wall_seconds: float = Field(0.0, ge=0)


class RunProgress(Event):
    job_id: UUID
    datacenter: str
    step: int = Field(ge=0)
    total_steps: int = Field(ge=1)
    train_loss: float | None = None
    val_loss: float | None = None
    learning_rate: float | None = None
    power_w: float = Field(0.0, ge=0, description="mean power above idle over the last interval, W")
    step_time_s: float | None = Field(None, ge=0)
    estimated_remaining_gpu_hours: float | None = Field(None, ge=0)
    accounting: RunAccounting = RunAccounting()


class RunMetrics(Contract):
    val_loss: float
    accuracy: float | None = Field(None, ge=0, le=1)
    macro_f1: float | None = Field(None, ge=0, le=1)
    perplexity: float | None = Field(None, ge=0)


class RunCompleted(Event):
    job_id: UUID
    study_id: UUID
    datacenter: str
    config: LoraConfig
    metrics: RunMetrics
    steps: int = Field(ge=0)
    early_stopped: bool = False
    adapter_key: str | None = Field(None, description="object-store key of the trained LoRA adapter")
    accounting: RunAccounting


class FailureReason(StrEnum):
    unknown_base_model = "unknown_base_model"
    invalid_config = "invalid_config"
    dataset_missing = "dataset_missing"
    empty_split = "empty_split"
    smoke_test_failed = "smoke_test_failed"
    out_of_memory = "out_of_memory"
    wrong_datacenter = "wrong_datacenter"
    internal = "internal"


class RunFailed(Event):
    job_id: UUID
    study_id: UUID | None = None
    datacenter: str
    reason: FailureReason
    message: str
    accounting: RunAccounting = RunAccounting()


class RunPaused(Event):
    job_id: UUID
    study_id: UUID
    datacenter: str
    step: int = Field(ge=0)
    checkpoint_key: str
    accounting: RunAccounting = RunAccounting()
