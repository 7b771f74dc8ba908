"""Zipf MLE, MATTR and the bounded-memory counters."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain.lexicon import Mattr, TypeCounter
from metatune_profiler.domain.profile import ProfileOptions
from metatune_profiler.domain.sampling import DuplicateCounter, Reservoir
from metatune_profiler.domain.zipf import fit_discrete_power_law
from tests.support.plugin import TEST_DATA


@pytest.mark.parametrize("alpha", [1.5, 2.0, 2.5])
def test_zipf_mle_recovers_alpha_from_200k_draws(alpha: float) -> None:
    draws = np.random.default_rng(int(alpha * 10)).zipf(alpha, 200_000)
    fit = fit_discrete_power_law(draws)
    assert fit is not None
    assert abs(fit.alpha - alpha) <= 0.05
    assert 0 < fit.alpha_se < 0.05
    assert abs(fit.alpha - alpha) < 4 * fit.alpha_se  # the error bar is honest, not just small


def test_zipf_finds_x_min_above_a_non_power_law_head() -> None:
    rng = np.random.default_rng(7)
    tail = rng.zipf(2.2, 600_000)
    tail = tail[tail >= 10]
    head = rng.integers(1, 10, size=tail.size)  # uniform below 10: not a power law
    fit = fit_discrete_power_law(np.concatenate([head, tail]))
    assert fit is not None and 10 <= fit.x_min <= 20
    assert abs(fit.alpha - 2.2) < 0.05


def test_zipf_accepts_frequency_of_frequencies() -> None:
    draws = np.random.default_rng(1).zipf(2.0, 20_000)
    as_map = Counter(draws.tolist())
    assert fit_discrete_power_law(as_map) == fit_discrete_power_law(draws)
    assert fit_discrete_power_law({1: 10, 2: 5}) is None


def test_profile_recovers_alpha_of_a_synthetic_corpus(tmp_path: Path) -> None:
    """Types whose frequencies are Zipf(2) draws: the profile's zipf_alpha is that exponent."""
    rng = np.random.default_rng(11)
    frequencies = rng.zipf(2.0, 40_000)
    frequencies = frequencies[frequencies < 5_000]
    tokens = np.repeat(np.arange(frequencies.size), frequencies)
    rng.shuffle(tokens)
    path = tmp_path / "zipf.txt"
    with open(path, "w") as fh:
        for line in np.array_split(tokens, tokens.size // 20):
            fh.write(" ".join(f"w{t}" for t in line) + "\n")
    features = profile_file(path, ProfileOptions(sample_size=64)).features
    assert features.vocab_size == frequencies.size
    assert features.zipf_alpha is not None and abs(features.zipf_alpha - 2.0) <= 0.05


def naive_mattr_sum(tokens: list[str], window: int) -> int:
    return sum(len(set(tokens[j : j + window])) for j in range(len(tokens) - window + 1))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefg"), min_size=0, max_size=120),
    st.integers(1, 12),
    st.lists(st.integers(1, 30), min_size=1, max_size=10),
)
def test_streaming_mattr_equals_definition(tokens: list[str], window: int, cuts: list[int]) -> None:
    mattr = Mattr(window)
    start = 0
    for size in cuts * 20:
        mattr.update(tokens[start : start + size])
        start += size
        if start >= len(tokens):
            break
    mattr.update(tokens[start:])
    windows = len(tokens) - window + 1
    if windows > 0:
        assert mattr.value(ttr_if_short=-1.0) == pytest.approx(
            naive_mattr_sum(tokens, window) / (windows * window)
        )
    else:
        assert mattr.value(ttr_if_short=-1.0) == -1.0


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_mattr_is_stable_when_doubled_while_ttr_falls(tmp_path: Path) -> None:
    rows = _read(TEST_DATA / "fortunes_en.jsonl.gz")
    half = len(rows) // 2
    original, doubled = tmp_path / "half.jsonl", tmp_path / "doubled.jsonl"
    original.write_text("".join(json.dumps(r) + "\n" for r in rows[:half]))
    doubled.write_text("".join(json.dumps(r) + "\n" for r in rows[: 2 * half]))  # + a disjoint half
    options = ProfileOptions(sample_size=32)
    small, large = profile_file(original, options).features, profile_file(doubled, options).features
    assert large.ttr < 0.85 * small.ttr
    assert abs(large.mattr / small.mattr - 1) < 0.05


def test_type_sampling_estimates_vocabulary_and_hapax() -> None:
    rng = np.random.default_rng(5)
    tokens = [f"t{i}" for i in rng.zipf(1.6, 300_000)]
    exact, sampled = TypeCounter(10**7), TypeCounter(2_000)
    for start in range(0, len(tokens), 10_000):
        exact.update(tokens[start : start + 10_000])
        sampled.update(tokens[start : start + 10_000])
    assert exact.level == 0 and sampled.level > 0 and len(sampled.counts) <= 2_000
    assert sampled.vocab_size == pytest.approx(exact.vocab_size, rel=0.1)
    assert sampled.hapax_ratio() == pytest.approx(exact.hapax_ratio(), abs=0.03)
    assert all(
        exact.counts[t] == c for t, c in sampled.counts.items()
    )  # kept types are counted exactly
    fit_exact = fit_discrete_power_law(exact.frequency_of_frequencies())
    fit_sampled = fit_discrete_power_law(sampled.frequency_of_frequencies())
    assert fit_sampled.alpha == pytest.approx(fit_exact.alpha, abs=0.1)


def test_duplicate_rate_exact_then_sampled() -> None:
    texts = [f"example {i % 7_500}" for i in range(10_000)]  # 2,500 duplicates
    exact, sampled = DuplicateCounter(10**6), DuplicateCounter(1_000)
    for text in texts:
        exact.add(text, None)
        sampled.add(text, None)
    assert exact.rate() == 0.25
    assert sampled.level > 0 and sampled.rate() == pytest.approx(0.25, abs=0.05)
    pairs = DuplicateCounter(100)
    pairs.add("a", "b")
    pairs.add("a", None)
    pairs.add("a", "b")
    assert pairs.rate() == pytest.approx(1 / 3)


def test_reservoir_is_uniform_and_seeded() -> None:
    hits = Counter()
    for seed in range(400):
        reservoir: Reservoir[int] = Reservoir(10, seed)
        for i in range(100):
            reservoir.add(i)
        hits.update(reservoir.items)
    # each of 100 items is kept with probability 1/10: 40 expected hits in 400 runs
    assert min(hits.values()) > 15 and max(hits.values()) < 70
    a, b = Reservoir(5, 3), Reservoir(5, 3)
    for i in range(1000):
        a.add(i)
        b.add(i)
    assert a.items == b.items
