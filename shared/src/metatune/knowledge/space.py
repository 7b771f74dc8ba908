"""The LoRA search space the knowledge base is built over and the recommender searches.

One definition for both: ``metatune kb build`` draws its space-filling design here, and the
recommender scores candidates from the same space, so a recommendation never leaves the region
the knowledge base has evidence for. Each dimension maps a unit interval to a value (log scale
for the learning rate, rank and alpha ratio), so a Sobol point in [0, 1)^d is a configuration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metatune.contracts import LoraConfig, LrSchedule

RANKS = (2, 4, 8, 16, 32, 64)
BATCH_SIZES = (8, 16, 32, 64)
SCHEDULES = (LrSchedule.linear, LrSchedule.cosine, LrSchedule.constant)
# Target-module sets by name; BERT-style module names (the embedded MiniLM). ``None`` = peft's
# default for the architecture (query, value).
TARGET_SETS: dict[str, list[str] | None] = {
    "qv": None,
    "attention": ["query", "key", "value", "attention.output.dense"],
    "all-linear": ["all-linear"],
}
# Learning rates a LoRA run of the embedded model learns with in the seed's budget (two epochs):
# below ~3e-4 runs of the first seed (1e-5..5e-3, 64 steps) almost never left the majority baseline;
# at 3.3e-3, batch 8 (200 steps), the second seed's first runs collapsed to the majority class.
LR_RANGE = (3e-4, 3e-3)
ALPHA_RATIO_RANGE = (0.5, 4.0)  # alpha / rank
DROPOUT_RANGE = (0.0, 0.3)
WARMUP_RANGE = (0.0, 0.2)

DIMENSIONS = (
    "learning_rate",
    "rank",
    "alpha_ratio",
    "dropout",
    "batch_size",
    "warmup_ratio",
    "lr_schedule",
    "targets",
)


def _log_interp(u: float, low: float, high: float) -> float:
    return math.exp(math.log(low) + u * (math.log(high) - math.log(low)))


def _pick(u: float, options: Sequence[Any]) -> Any:
    return options[min(len(options) - 1, int(u * len(options)))]


@dataclass(frozen=True)
class Budget:
    """How long a configuration trains: fixed steps (the knowledge base) or epochs (a user's run)."""

    max_steps: int | None = None
    epochs: float | None = 1.0
    max_seq_length: int = 128


def decode(unit: Sequence[float], *, budget: Budget = Budget(), seed: int = 13) -> LoraConfig:
    """The configuration at a point of the unit cube (one coordinate per :data:`DIMENSIONS`)."""
    if len(unit) != len(DIMENSIONS):
        raise ValueError(f"expected {len(DIMENSIONS)} coordinates, got {len(unit)}")
    u = dict(zip(DIMENSIONS, (min(max(float(x), 0.0), 1.0 - 1e-9) for x in unit), strict=True))
    rank = _pick(u["rank"], RANKS)
    return LoraConfig(
        rank=rank,
        alpha=round(rank * _log_interp(u["alpha_ratio"], *ALPHA_RATIO_RANGE), 3),
        dropout=round(DROPOUT_RANGE[0] + u["dropout"] * (DROPOUT_RANGE[1] - DROPOUT_RANGE[0]), 4),
        learning_rate=float(f"{_log_interp(u['learning_rate'], *LR_RANGE):.3g}"),
        batch_size=_pick(u["batch_size"], BATCH_SIZES),
        warmup_ratio=round(
            WARMUP_RANGE[0] + u["warmup_ratio"] * (WARMUP_RANGE[1] - WARMUP_RANGE[0]), 4
        ),
        lr_schedule=_pick(u["lr_schedule"], SCHEDULES),
        target_modules=TARGET_SETS[_pick(u["targets"], list(TARGET_SETS))],
        max_steps=budget.max_steps,
        epochs=None if budget.max_steps is not None else budget.epochs,
        max_seq_length=budget.max_seq_length,
        seed=seed,
    )


def target_set_name(target_modules: list[str] | None) -> str:
    for name, modules in TARGET_SETS.items():
        if modules == target_modules:
            return name
    return "custom"


def encode(config: LoraConfig | dict[str, Any]) -> list[float]:
    """Numeric features of a configuration for a surrogate model: log lr, log2 rank, log alpha ratio,
    dropout, log2 batch, warm-up, schedule index, target-set index (all scaled to about [0, 1])."""
    c = config if isinstance(config, LoraConfig) else LoraConfig.model_validate(config)
    lr_lo, lr_hi = (math.log(v) for v in LR_RANGE)
    ratio_lo, ratio_hi = (math.log(v) for v in ALPHA_RATIO_RANGE)
    names = list(TARGET_SETS)
    target = target_set_name(c.target_modules)
    return [
        (math.log(c.learning_rate) - lr_lo) / (lr_hi - lr_lo),
        (math.log2(c.rank) - 1) / 5,
        (math.log(c.alpha / c.rank) - ratio_lo) / (ratio_hi - ratio_lo),
        c.dropout / DROPOUT_RANGE[1],
        (math.log2(c.batch_size * c.grad_accum_steps) - 3) / 3,
        c.warmup_ratio / WARMUP_RANGE[1],
        SCHEDULES.index(c.lr_schedule) / (len(SCHEDULES) - 1),
        (names.index(target) if target in names else len(names) - 1) / (len(names) - 1),
    ]


GRID_LEARNING_RATES = (1e-4, 5e-4, 2e-3)


def grid(budget: Budget = Budget()) -> list[LoraConfig]:
    """The grid search a user would run over this space without MetaTune: every rank x batch size
    at three learning rates (72 configurations), the other dimensions at LoraConfig's defaults."""
    return [
        LoraConfig(
            rank=rank,
            alpha=2.0 * rank,
            learning_rate=lr,
            batch_size=batch,
            max_steps=budget.max_steps,
            epochs=None if budget.max_steps is not None else budget.epochs,
            max_seq_length=budget.max_seq_length,
        )
        for rank in RANKS
        for batch in BATCH_SIZES
        for lr in GRID_LEARNING_RATES
    ]
