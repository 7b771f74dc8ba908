"""GPU-hours and energy of a configuration, from the throughput the knowledge base measured.

Throughput = tokens with padding / seconds inside optimizer steps, power = energy / wall time,
both summed over the history runs of the base model in use (GPU runs preferred where there are
any; otherwise what was measured, and the device is named). A job's tokens = examples x padded
tokens per example (the profile's mean length over 1 - grouped padding) x epochs. Only when the
knowledge base has no timed run at all does the documented assumption of the cold start apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metatune.contracts import LoraConfig, MetaFeatures
from metatune.knowledge.records import KbRun

from .cold_start import ASSUMED_POWER_KW_PER_GPU, ASSUMED_TOKENS_PER_GPU_SECOND

MIN_GPU_HOURS = 0.01


@dataclass(frozen=True)
class Throughput:
    tokens_per_second: float
    power_kw: float
    device: str  # cuda, cpu, or "assumed"
    runs: int


def measured_throughput(runs: Sequence[KbRun]) -> Throughput:
    timed = [
        r for r in runs if r.tokens_with_padding > 0 and (r.train_seconds or r.wall_seconds) > 0
    ]
    gpu = [r for r in timed if r.hardware is not None and r.hardware.device == "cuda"]
    chosen = gpu or timed
    if not chosen:
        return Throughput(ASSUMED_TOKENS_PER_GPU_SECOND, ASSUMED_POWER_KW_PER_GPU, "assumed", 0)
    tokens = sum(r.tokens_with_padding for r in chosen)
    seconds = sum(r.train_seconds or r.wall_seconds for r in chosen)
    energy = [
        (r.energy_wh, r.wall_seconds) for r in chosen if r.energy_wh > 0 and r.wall_seconds > 0
    ]
    power = (
        (sum(e for e, _ in energy) / (sum(s for _, s in energy) / 3600.0) / 1000.0)
        if energy
        else ASSUMED_POWER_KW_PER_GPU
    )
    device = "cuda" if gpu else (chosen[0].hardware.device if chosen[0].hardware else "unknown")
    return Throughput(tokens / seconds, power, device, len(chosen))


def padded_tokens_per_example(features: MetaFeatures, max_seq_length: int) -> float:
    mean = min(features.tokens_mean, float(max_seq_length))
    return mean / max(1e-6, 1.0 - features.padding_fraction_grouped)


def estimate(
    config: LoraConfig, features: MetaFeatures, throughput: Throughput
) -> tuple[float, float]:
    """(GPU-hours, energy in Wh) of one training run of ``config`` on this dataset."""
    per_example = padded_tokens_per_example(features, config.max_seq_length)
    examples: float
    if config.max_steps is not None:
        examples = config.max_steps * config.batch_size * config.grad_accum_steps
    else:
        examples = features.n_examples * (config.epochs or 1.0)
    hours = max(MIN_GPU_HOURS, examples * per_example / throughput.tokens_per_second / 3600.0)
    return hours, hours * throughput.power_kw * 1000.0
