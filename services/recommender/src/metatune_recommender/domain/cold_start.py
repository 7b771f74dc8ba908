"""Cold start: the configurations to try before the knowledge base has runs to learn from.

Until the Gaussian-process recommender lands, a study gets the first ``trials`` entries of a
fixed portfolio of widely used LoRA settings (the peft defaults and the rank / learning-rate
pairs most reported for encoder fine-tuning), ordered so that any prefix spreads over rank and
learning rate. Cost estimates come from the profile's token counts and a stated throughput
assumption; the trainer-agent replaces them with measured step times once a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from metatune.contracts import LoraConfig, LrSchedule, MetaFeatures

PORTFOLIO = [
    LoraConfig(rank=8, alpha=16, learning_rate=3e-4, lr_schedule=LrSchedule.linear),
    LoraConfig(rank=16, alpha=32, learning_rate=1e-4, lr_schedule=LrSchedule.cosine),
    LoraConfig(rank=4, alpha=8, learning_rate=1e-3, lr_schedule=LrSchedule.linear),
    LoraConfig(rank=32, alpha=64, learning_rate=5e-5, lr_schedule=LrSchedule.cosine),
    LoraConfig(rank=8, alpha=8, learning_rate=5e-4, lr_schedule=LrSchedule.cosine, dropout=0.1),
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
