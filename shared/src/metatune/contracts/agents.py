"""Trainer-agent heartbeat."""

from __future__ import annotations

from uuid import UUID

from pydantic import Field

from .base import DatacenterName, Event


class AgentStatus(Event):
    datacenter: DatacenterName
    region: str = Field(
        description="grid region (Electricity Maps zone id) the datacenter draws from"
    )
    gpus_total: int = Field(ge=0, description="GPUs the datacenter offers MetaTune")
    gpus_free: int = Field(ge=0, description="GPUs not running a job now")
    gpu_model: str = Field(description="GPU model, e.g. H100-80GB")
    power_per_gpu_w: float = Field(ge=0, description="board power per GPU at full load, W")
    pue: float = Field(ge=1, description="power usage effectiveness of the site")
    running_jobs: list[UUID] = Field(default_factory=list, description="jobs training there now")
