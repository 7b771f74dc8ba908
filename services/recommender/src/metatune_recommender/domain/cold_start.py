"""Cold start: the configurations a study gets while the knowledge base has no runs to learn from.

The portfolio is the knowledge base's own answer, not a guess: the greedy portfolio of the
shipped seed (``metatune kb portfolio --kb .../data/seed_kb.jsonl --k 5``: each entry is the
configuration that most raises the mean over the seed's 12 datasets of the best normalised
accuracy so far, so any prefix complements itself). The seed's step budget is left out, so a
study's own budget applies. ``tests/recommender/test_cold_start_portfolio.py`` fails when the seed
changes and this list does not. Cost estimates come from the profile's token counts and a stated
throughput assumption; the trainer-agent replaces them with measured step times once a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from metatune.contracts import LoraConfig, LrSchedule, MetaFeatures

ATTENTION = ["query", "key", "value", "attention.output.dense"]
PORTFOLIO = [
    LoraConfig(
        rank=8,
        alpha=4.004,
        dropout=0.1359,
        target_modules=ATTENTION,
        learning_rate=0.00245,
        lr_schedule=LrSchedule.constant,
        warmup_ratio=0.1953,
        batch_size=8,
    ),
    LoraConfig(
        rank=4,
        alpha=4.738,
        dropout=0.2927,
        target_modules=ATTENTION,
        learning_rate=0.00104,
        lr_schedule=LrSchedule.constant,
        warmup_ratio=0.1178,
        batch_size=32,
    ),
    LoraConfig(
        rank=32,
        alpha=113.989,
        dropout=0.0747,
        target_modules=["all-linear"],
        learning_rate=0.00358,
        lr_schedule=LrSchedule.linear,
        warmup_ratio=0.1567,
        batch_size=64,
    ),
    LoraConfig(
        rank=16,
        alpha=28.298,
        dropout=0.2127,
        target_modules=["all-linear"],
        learning_rate=0.00071,
        lr_schedule=LrSchedule.linear,
        warmup_ratio=0.1283,
        batch_size=16,
    ),
    LoraConfig(
        rank=64,
        alpha=68.033,
        dropout=0.1094,
        target_modules=ATTENTION,
        learning_rate=0.00198,
        lr_schedule=LrSchedule.cosine,
        warmup_ratio=0.1121,
        batch_size=8,
    ),
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


def cold_start_trials(features: MetaFeatures, trials: int) -> list[Trial]:
    """The first ``trials`` portfolio configurations, sized for this dataset."""
    padded_tokens_per_example = features.tokens_mean / max(
        1e-6, 1.0 - features.padding_fraction_grouped
    )
    result = []
    for config in PORTFOLIO[: max(1, trials)]:
        max_len = max(config.max_seq_length, min(512, int(features.tokens_p95) + 2))
        config = config.model_copy(update={"max_seq_length": max_len})
        epochs = config.epochs or 1.0
        tokens = features.n_examples * padded_tokens_per_example * epochs
        hours = max(MIN_GPU_HOURS, tokens / ASSUMED_TOKENS_PER_GPU_SECOND / 3600.0)
        result.append(
            Trial(
                config=config,
                estimated_gpu_hours=round(hours, 3),
                power_kw=ASSUMED_POWER_KW_PER_GPU,
            )
        )
    return result
