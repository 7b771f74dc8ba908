"""What a training run is given and gives back: its site, its hooks (progress, checkpoints,
control, a stop rule), the progress it reports, the pace of a session and its outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Literal

from metatune.contracts import RunAccounting

from .energy import DEFAULT_WATTS_PER_CORE
from .trainer import Evaluation


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
