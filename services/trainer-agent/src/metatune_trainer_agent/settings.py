"""The settings of a trainer-agent (one process per datacenter), over the platform's (:class:`metatune.settings.Settings`):
the same ``METATUNE_*`` environment variables, the same ``.env``; the README's configuration
table lists them under their service."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from metatune.settings import Settings


class AgentSettings(Settings):
    """A trainer-agent's own: its runs, their energy and curve stopping, its bus retries.

    The retries are of uploads and publishes that must not be lost through a bus outage."""

    bus_retry_budget_s: float = Field(
        180.0,
        gt=0,
        description="Seconds an upload or publish is retried through a bus outage before it counts as failed",
    )
    bus_retry_initial_s: float = Field(
        0.5, gt=0, description="First retry delay of a failed upload or publish; doubles"
    )
    bus_retry_max_s: float = Field(
        10.0, gt=0, description="Longest delay between two retries of an upload or publish"
    )
    agent_device: str = Field(
        "auto", description="torch device for runs: auto (CUDA when present), cpu, cuda"
    )
    agent_checkpoint_every: int = Field(
        50, ge=1, description="Optimizer steps between checkpoints to the object store"
    )
    agent_progress_interval_s: float = Field(
        2.0, ge=0, description="Least real seconds between two progress events"
    )
    agent_idle_seconds: float = Field(
        1.0, ge=0, description="Seconds the idle power baseline is measured per run"
    )
    agent_watts_per_core: float = Field(
        12.0, gt=0, description="CPU power model (W per busy core) when RAPL is unreadable"
    )
    agent_max_eval_examples: int = Field(
        512, ge=1, description="Held-out examples per periodic evaluation"
    )
    agent_curve_stop: bool = Field(
        True, description="Stop a trial whose predicted final metric cannot beat its study's best"
    )
    agent_curve_stop_confidence: float = Field(
        0.95,
        gt=0,
        lt=1,
        description="Confidence of the predicted final metric's upper bound the curve stopper compares",
    )
    agent_curve_stop_margin: float = Field(
        0.0, ge=0, description="Stop only when the upper bound is below best - margin"
    )
    agent_curve_stop_model: Path | None = Field(
        None,
        description="Curve-stop model file (default: the one shipped in the trainer-agent package)",
    )
