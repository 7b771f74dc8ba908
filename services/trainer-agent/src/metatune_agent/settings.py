"""Agent-only settings (``METATUNE_AGENT_*``). The datacenter's GPUs, GPU model and power, PUE and
region come from the datacenter registry; bus, clock and data directory from the shared Settings."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .domain.energy import DEFAULT_WATTS_PER_CORE


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="METATUNE_AGENT_", env_file=".env", extra="ignore")

    device: str = Field("auto", description="torch device for runs: auto (CUDA when present), cpu, cuda")
    checkpoint_every: int = Field(50, ge=1, description="optimizer steps between checkpoints to the object store")
    progress_interval_s: float = Field(2.0, ge=0, description="least real seconds between two progress events")
    status_interval_s: float = Field(5.0, gt=0, description="real seconds between agent status heartbeats")
    idle_seconds: float = Field(1.0, ge=0, description="seconds the idle power baseline is measured per run")
    watts_per_core: float = Field(DEFAULT_WATTS_PER_CORE, gt=0, description="CPU power model when RAPL is unreadable")
    max_eval_examples: int = Field(512, ge=1, description="held-out examples per periodic evaluation")
