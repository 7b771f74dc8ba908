"""The cost model: GPU-hours x power = the energy the agents' meter charges per token, from the
device this platform trains on at the job's batch size, and no floor that inflates a small job's
energy."""

from __future__ import annotations

import pytest

from metatune.contracts import LoraConfig
from metatune.knowledge.records import DatasetInfo, Hardware, KbRun
from metatune_recommender.domain.costs import (
    Pricing,
    estimate,
    measured_throughput,
    padded_tokens_per_example,
)

from .synthetic import features, kb_run

DATASET = DatasetInfo(name="d")
# uuid of a study on this platform: a run its own agents trained
STUDY = "8a6b3c1e-0000-4000-8000-000000000001"


def run(
    device: str, *, tokens: int, train_s: float, wall_s: float, wh: float, study: bool = False
) -> KbRun:
    return kb_run("r", DATASET, {}, 0.5, "m").model_copy(
        update={
            "tokens_with_padding": tokens,
            "train_seconds": train_s,
            "wall_seconds": wall_s,
            "energy_wh": wh,
            "hardware": Hardware(device=device),
            "study_id": STUDY if study else None,
        }
    )


def test_hours_times_power_is_the_metered_energy_per_token() -> None:
    """The meter charges the whole run (evaluations, loading) while throughput counts the seconds
    inside optimizer steps: power is energy per training second, so the product is exact."""
    runs = [
        run("cuda", tokens=10_000, train_s=4.0, wall_s=10.0, wh=0.5),
        run("cuda", tokens=30_000, train_s=6.0, wall_s=20.0, wh=1.5),
    ]
    t = measured_throughput(runs)
    assert t.tokens_per_second == pytest.approx(40_000 / 10.0)
    wh_per_token = 2.0 / 40_000
    seconds_for = 80_000 / t.tokens_per_second
    assert seconds_for / 3600 * t.power_kw * 1000 == pytest.approx(80_000 * wh_per_token)


def test_this_platforms_own_runs_price_before_a_gpu_seed() -> None:
    """The seed's GPU runs say nothing of agents that train on the CPU: once the platform has
    runs of its own, they set the throughput and the power, and the device is named."""
    seed = run("cuda", tokens=100_000, train_s=5.0, wall_s=9.0, wh=0.3)
    own = run("cpu", tokens=10_000, train_s=10.0, wall_s=40.0, wh=0.1, study=True)
    assert measured_throughput([seed]).device == "cuda"
    t = measured_throughput([seed, own])
    assert (t.device, t.runs) == ("cpu", 1)
    assert t.tokens_per_second == pytest.approx(1_000.0)
    assert t.power_kw == pytest.approx(0.1 / (10.0 / 3600) / 1000)


def test_a_small_job_is_not_priced_at_a_floor_of_gpu_hours() -> None:
    """A few seconds on a GPU: its energy is its tokens' metered energy, not 36 s at full power."""
    t = measured_throughput([run("cuda", tokens=20_000, train_s=1.0, wall_s=3.0, wh=0.05)])
    config = LoraConfig(epochs=1.0, max_seq_length=128)
    profile = features(300)
    hours, energy_wh = estimate(config, profile, t)
    tokens = 300 * padded_tokens_per_example(profile, 128)
    assert hours < 0.01
    assert energy_wh == pytest.approx(tokens * 0.05 / 20_000)


def test_the_fleets_device_prices_before_a_gpu_seed() -> None:
    """Agents that train on the CPU are priced from the knowledge base's CPU runs, not the GPU
    seed's, until their own runs arrive (then those)."""
    gpu = run("cuda", tokens=100_000, train_s=5.0, wall_s=9.0, wh=0.3)
    cpu = run("cpu", tokens=10_000, train_s=10.0, wall_s=40.0, wh=0.2)
    assert measured_throughput([gpu, cpu]).device == "cuda"
    t = measured_throughput([gpu, cpu], device="cpu")
    assert (t.device, t.runs, t.tokens_per_second) == ("cpu", 1, pytest.approx(1_000.0))
    # a device the knowledge base never measured: the GPU runs still answer
    assert measured_throughput([gpu, cpu], device="rocm").device == "cuda"
    own = run("cuda", tokens=5_000, train_s=1.0, wall_s=2.0, wh=0.01, study=True)
    assert measured_throughput([gpu, cpu, own], device="cpu").runs == 1
    assert measured_throughput([gpu, cpu, own], device="cpu").tokens_per_second == 5_000


def test_runs_at_the_configurations_batch_size_price_it() -> None:
    """Energy per token falls with the batch (per-step overhead spread over more tokens): a job is
    priced from the runs at its batch size, and from all the device's runs when none is there."""

    def at(batch_size: int, tokens: int, wh: float) -> KbRun:
        r = run("cuda", tokens=tokens, train_s=1.0, wall_s=2.0, wh=wh)
        return r.model_copy(update={"config": {**r.config, "batch_size": batch_size}})

    runs = [at(8, 10_000, 0.04), at(64, 60_000, 0.04)]
    small, large = (
        Pricing(runs).throughput(LoraConfig(batch_size=8)),
        Pricing(runs).throughput(LoraConfig(batch_size=64)),
    )
    assert (small.tokens_per_second, large.tokens_per_second) == (10_000, 60_000)
    per_token = [t.power_kw / t.tokens_per_second for t in (small, large)]
    assert per_token[0] == pytest.approx(6 * per_token[1])
    assert Pricing(runs).throughput(LoraConfig(batch_size=16)).runs == 2
    assert Pricing(runs).throughput().runs == 2
