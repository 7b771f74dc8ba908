"""How much each history task says about a new dataset: a kernel over their meta-features.

Before a study has results, its metric scale is unknown (a 77-class intent set and a binary
sentiment set reach very different accuracies with the same configuration), so a prediction in
metric units borrows the scales of the history tasks. Tasks whose descriptors are close to the new
dataset's (standardised by the history's spread, squared-exponential kernel, bandwidth = the median
distance) count more; the weights sum to one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .history import Task


def task_weights(descriptors: Mapping[str, Any], history: Sequence[Task]) -> np.ndarray:
    """One weight per history task (uniform when no numeric descriptor is shared)."""
    n = len(history)
    if n == 0:
        return np.zeros(0)
    keys = sorted(
        key
        for key, value in descriptors.items()
        if _number(value) and all(_number(t.descriptors.get(key)) for t in history)
    )
    if not keys:
        return np.full(n, 1.0 / n)
    table = np.array([[float(t.descriptors[key]) for key in keys] for t in history])
    spread = table.std(axis=0)
    keep = spread > 0
    if not keep.any():
        return np.full(n, 1.0 / n)
    centre = np.array([float(descriptors[key]) for key in keys])
    z = (table[:, keep] - centre[keep]) / spread[keep]
    distance = np.sqrt((z**2).sum(axis=1))
    bandwidth = float(np.median(distance)) or 1.0
    weights = np.exp(-0.5 * (distance / bandwidth) ** 2)
    return np.asarray(weights / weights.sum())


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)


def descriptor_similarity(
    descriptors: Mapping[str, Any], others: Sequence[Mapping[str, Any]]
) -> np.ndarray:
    """Weights (summing to one) of ``others`` by closeness to ``descriptors``, over every descriptor
    both sides have: numbers standardised by the others' spread (logged when positive and spanning
    more than 4x, as sizes are), strings counting one unit of distance when they differ.
    Squared-exponential kernel, bandwidth = the median distance; uniform when nothing is shared."""
    n = len(others)
    if n == 0:
        return np.zeros(0)
    squared = np.zeros(n)
    for key, value in descriptors.items():
        if _number(value):
            column = [o.get(key) for o in others]
            if not all(_number(v) for v in column):
                continue
            values = np.array([*(float(v) for v in column if v is not None), float(value)])
            if values.min() > 0 and values.max() / values.min() >= 4:
                values = np.log(values)
            spread = values[:-1].std() or values.std()
            if spread > 0:
                squared += ((values[:-1] - values[-1]) / spread) ** 2
        elif isinstance(value, str):
            squared += np.array([o.get(key) is not None and o.get(key) != value for o in others])
    distance = np.sqrt(squared)
    bandwidth = float(np.median(distance)) or 1.0
    weights = np.exp(-0.5 * (distance / bandwidth) ** 2)
    return np.asarray(weights / weights.sum())
