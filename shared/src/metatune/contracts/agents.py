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
    gpus_total: int = Field(
        ge=0,
        description="GPUs the agent offers MetaTune now: the datacenter's capacity for the "
        "scheduler (the registry's figure is only its ceiling)",
    )
    gpus_free: int = Field(ge=0, description="GPUs not running a job now")
    gpu_model: str = Field(description="GPU model, e.g. H100-80GB")
    gpu_memory_mib: int | None = Field(
        default=None, ge=0, description="memory per GPU, MiB (None: no CUDA device, a CPU agent)"
    )
    device: str | None = Field(
        default=None,
        description="what trains there: 'cuda' (GPUs seen through torch.cuda / NVML) or 'cpu' "
        "(a CPU agent simulating the datacenter's GPUs); None: an agent that does not say",
    )
    device_model: str | None = Field(
        default=None, description="the hardware's own model name: the CUDA device's, else the CPU's"
    )
    power_per_gpu_w: float = Field(ge=0, description="board power per GPU at full load, W")
    pue: float = Field(ge=1, description="power usage effectiveness of the site")
    running_jobs: list[UUID] = Field(default_factory=list, description="jobs training there now")
