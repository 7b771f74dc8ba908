"""Trainer-agent heartbeat."""

from __future__ import annotations

from uuid import UUID

from pydantic import Field

from .base import Event


class AgentStatus(Event):
    datacenter: str
    region: str
    gpus_total: int = Field(ge=0)
    gpus_free: int = Field(ge=0)
    gpu_model: str
    power_per_gpu_w: float = Field(ge=0)
    pue: float = Field(ge=1)
    running_jobs: list[UUID] = Field(default_factory=list)
