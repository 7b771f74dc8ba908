"""Small exact statistics: label distribution, quantiles of a length histogram, padding."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

MEGABATCH_FACTOR = 50  # Hugging Face LengthGroupedSampler sorts mega-batches of 50 batches


def label_entropy_bits(counts: Mapping[str, int]) -> float:
    """Shannon entropy of the label distribution, in bits."""
    total = sum(counts.values())
    if total == 0:
        return 0.0
    return max(0.0, -sum(c / total * math.log2(c / total) for c in counts.values() if c))


def normalised_entropy(counts: Mapping[str, int]) -> float:
    """Entropy / log2(number of classes): 1 for balanced classes; 0 with fewer than 2 classes."""
    k = len(counts)
    return min(1.0, label_entropy_bits(counts) / math.log2(k)) if k >= 2 else 0.0


def imbalance_ratio(counts: Mapping[str, int]) -> float:
    """Largest class count / smallest (1 for balanced or unlabelled data)."""
    return max(counts.values()) / min(counts.values()) if counts else 1.0


def histogram_quantile(histogram: Mapping[int, int], q: float) -> float:
    """The q-quantile of the values a histogram counts, with numpy's default linear interpolation."""
    if not histogram:
        return 0.0
    values = np.array(sorted(histogram), dtype=np.float64)
    cumulative = np.cumsum([histogram[int(v)] for v in values])
    position = (cumulative[-1] - 1) * q
    lower, upper = math.floor(position), math.ceil(position)
    at_lower = values[np.searchsorted(cumulative, lower, side="right")]
    at_upper = values[np.searchsorted(cumulative, upper, side="right")]
    return float(at_lower + (at_upper - at_lower) * (position - lower))


def histogram_mean(histogram: Mapping[int, int]) -> float:
    n = sum(histogram.values())
    return sum(v * c for v, c in histogram.items()) / n if n else 0.0


def _padding(batches: list[Sequence[int]]) -> float:
    real = sum(sum(b) for b in batches)
    padded = sum(len(b) * max(b) for b in batches if b)
    return 1.0 - real / padded if padded else 0.0


def padding_fraction_random(lengths: Sequence[int], batch_size: int, seed: int) -> float:
    """Share of padding tokens among all tokens when batches are drawn at random (each batch
    padded to its longest example, as dynamic padding does)."""
    shuffled = list(lengths)
    random.Random(seed).shuffle(shuffled)
    return _padding([shuffled[i : i + batch_size] for i in range(0, len(shuffled), batch_size)])


def padding_fraction_grouped(lengths: Sequence[int], batch_size: int, seed: int) -> float:
    """Same with length grouping as Hugging Face's ``group_by_length``: random mega-batches of
    50 batches, each sorted by length, then cut into batches. The mega-batch is what makes this
    a property of the data rather than of the sample size."""
    shuffled = list(lengths)
    random.Random(seed).shuffle(shuffled)
    mega = batch_size * MEGABATCH_FACTOR
    batches: list[Sequence[int]] = []
    for start in range(0, len(shuffled), mega):
        group = sorted(shuffled[start : start + mega], reverse=True)
        batches.extend(group[i : i + batch_size] for i in range(0, len(group), batch_size))
    return _padding(batches)


def length_histogram(values: Sequence[int]) -> Counter[int]:
    return Counter(values)
