"""Cold start: the configurations a study gets while the knowledge base has no runs to learn from.

The portfolio is the knowledge base's own answer, not a guess: the greedy portfolio of the
shipped seed (``metatune kb portfolio --kb .../data/seed_kb.jsonl --k 5``: each entry is the
configuration that most raises the mean over the seed's 12 datasets of the best normalised
accuracy so far, so any prefix complements itself). The seed's step budget is left out, so a
study's own budget applies. The list is generated, never pasted: ``scripts/cold_start_portfolio.py``
writes it from the seed and ``tests/recommender/test_cold_start_portfolio.py`` fails when it
differs. Cost estimates come from the profile's token counts and a stated throughput assumption;
the trainer-agent replaces them with measured step times once a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from metatune.contracts import LoraConfig, LrSchedule, MetaFeatures, TrainingBudget

ATTENTION = ["query", "key", "value", "attention.output.dense"]
ALL_LINEAR = ["all-linear"]
# rank, alpha, dropout, target modules, learning rate, schedule, warm-up ratio, weight decay,
# batch size, gradient accumulation steps
# BEGIN GENERATED: portfolio (scripts/cold_start_portfolio.py)
_ENTRIES = [
    (8, 4.004, 0.1359, ATTENTION, 0.00245, LrSchedule.constant, 0.1953, 0.0, 8, 1),
    (4, 4.738, 0.2927, ATTENTION, 0.00104, LrSchedule.constant, 0.1178, 0.0, 32, 1),
    (32, 113.989, 0.0747, ALL_LINEAR, 0.00358, LrSchedule.linear, 0.1567, 0.0, 64, 1),
    (16, 28.298, 0.2127, ALL_LINEAR, 0.00071, LrSchedule.linear, 0.1283, 0.0, 16, 1),
    (64, 68.033, 0.1094, ATTENTION, 0.00198, LrSchedule.cosine, 0.1121, 0.0, 8, 1),
]
# END GENERATED: portfolio
PORTFOLIO = [
    LoraConfig(
        rank=rank,
        alpha=alpha,
        dropout=dropout,
        target_modules=targets,
        learning_rate=lr,
        lr_schedule=schedule,
        warmup_ratio=warmup,
        weight_decay=decay,
        batch_size=batch,
        grad_accum_steps=accum,
    )
    for rank, alpha, dropout, targets, lr, schedule, warmup, decay, batch, accum in _ENTRIES
]

# Assumed training throughput of one GPU before any measurement, tokens (incl. padding) per second.
ASSUMED_TOKENS_PER_GPU_SECOND = 20_000.0
ASSUMED_POWER_KW_PER_GPU = 0.7  # H100 SXM board power at full load
MIN_GPU_HOURS = 0.25


@dataclass(frozen=True)
class Trial:
    config: LoraConfig
    estimated_gpu_hours: float
    power_kw: float
    gpus: int = 1


def cold_start_trials(
    features: MetaFeatures, trials: int, budget: TrainingBudget | None = None
) -> list[Trial]:
    """The first ``trials`` portfolio configurations at the study's ``budget`` (default: the
    study default), sized for this dataset."""
    budget = budget or TrainingBudget()
    padded_tokens_per_example = features.tokens_mean / max(
        1e-6, 1.0 - features.padding_fraction_grouped
    )
    result = []
    for config in PORTFOLIO[: max(1, trials)]:
        max_len = max(config.max_seq_length, min(512, int(features.tokens_p95) + 2))
        config = LoraConfig.model_validate(
            {**config.model_dump(), **budget.lengths(), "max_seq_length": max_len}
        )
        tokens = config.examples_seen(features.n_examples) * padded_tokens_per_example
        hours = max(MIN_GPU_HOURS, tokens / ASSUMED_TOKENS_PER_GPU_SECOND / 3600.0)
        result.append(
            Trial(
                config=config,
                estimated_gpu_hours=round(hours, 3),
                power_kw=ASSUMED_POWER_KW_PER_GPU,
            )
        )
    return result
