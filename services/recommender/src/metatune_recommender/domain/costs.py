"""GPU-hours and energy of a configuration, from the throughput the knowledge base measured.

Throughput = tokens with padding / seconds inside optimizer steps; power = the runs' metered
energy / those same seconds (the whole run's energy, evaluations and loading included, as the
agents' meter charges it, per second of training), so that hours x power = tokens x the metered
energy per token: the energy the scheduler prices and the meter then measures, on one basis.
Both are summed over the history runs of the base model in use, from the device the estimate is
for: this platform's own runs first (a study's runs, on the hardware its agents train on), then
runs on the device the agents say they train on (:class:`.fleet.Fleet`), then GPU runs, then
whatever was measured (the device is named). Among those, the runs at the configuration's batch
size when there are any: the energy per token falls several-fold from batch 8 to 64 (a GPU's
per-step overhead spread over more tokens). A job's tokens = examples x padded
tokens per example (the profile's mean length over 1 - grouped padding) x epochs. Only when the
knowledge base has no timed run at all does the documented assumption of the cold start apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metatune.contracts import LoraConfig, MetaFeatures
from metatune.knowledge.records import KbRun

from .cold_start import ASSUMED_POWER_KW_PER_GPU, ASSUMED_TOKENS_PER_GPU_SECOND

# a millisecond: only keeps a request's GPU-hours positive; a floor of any size would inflate a
# small job's energy (GPU-hours x power) above what its run meters
MIN_GPU_HOURS = 1e-6 / 3.6


@dataclass(frozen=True)
class Throughput:
    tokens_per_second: float
    power_kw: float
    device: str  # cuda, cpu, or "assumed"
    runs: int


def _seconds(run: KbRun) -> float:
    return run.train_seconds or run.wall_seconds


def _device(runs: Sequence[KbRun]) -> str:
    devices = sorted({r.hardware.device for r in runs if r.hardware is not None})
    return "+".join(devices) or "unknown"


def _on(device: str | None, runs: Sequence[KbRun]) -> list[KbRun]:
    return [r for r in runs if r.hardware is not None and r.hardware.device == device]


def measured_throughput(
    runs: Sequence[KbRun], *, device: str | None = None, batch_size: int | None = None
) -> Throughput:
    """Throughput and power of the runs that best stand for a job on ``device`` (the fleet's, when
    known) at ``batch_size`` (any when None)."""
    timed = [r for r in runs if r.tokens_with_padding > 0 and _seconds(r) > 0]
    fleet = [r for r in timed if r.study_id is not None]  # this platform's agents trained these
    chosen = fleet or (_on(device, timed) if device else []) or _on("cuda", timed) or timed
    same_batch = [r for r in chosen if r.config.get("batch_size") == batch_size]
    chosen = same_batch or chosen
    if not chosen:
        return Throughput(ASSUMED_TOKENS_PER_GPU_SECOND, ASSUMED_POWER_KW_PER_GPU, "assumed", 0)
    tokens = sum(r.tokens_with_padding for r in chosen)
    seconds = sum(_seconds(r) for r in chosen)
    metered = [r for r in chosen if r.energy_wh > 0]
    power = (
        sum(r.energy_wh for r in metered) / (sum(_seconds(r) for r in metered) / 3600.0) / 1000.0
        if metered
        else ASSUMED_POWER_KW_PER_GPU
    )
    return Throughput(tokens / seconds, power, _device(chosen), len(chosen))


def padded_tokens_per_example(features: MetaFeatures, max_seq_length: int) -> float:
    mean = min(features.tokens_mean, float(max_seq_length))
    return mean / max(1e-6, 1.0 - features.padding_fraction_grouped)


def estimate(
    config: LoraConfig, features: MetaFeatures, throughput: Throughput
) -> tuple[float, float]:
    """(GPU-hours, energy in Wh) of one training run of ``config`` on this dataset."""
    per_example = padded_tokens_per_example(features, config.max_seq_length)
    examples = config.examples_seen(features.n_examples)
    hours = max(MIN_GPU_HOURS, examples * per_example / throughput.tokens_per_second / 3600.0)
    return hours, hours * throughput.power_kw * 1000.0


@dataclass(frozen=True)
class Pricing:
    """The runs a base model's jobs are priced from, and the device the fleet trains on."""

    runs: Sequence[KbRun]
    device: str | None = None  # the fleet's (:class:`.fleet.Fleet`); None: not known

    def throughput(self, config: LoraConfig | None = None) -> Throughput:
        """At ``config``'s batch size (any batch size when None)."""
        batch_size = None if config is None else config.batch_size
        return measured_throughput(self.runs, device=self.device, batch_size=batch_size)
