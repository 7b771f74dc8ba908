"""How much each history task says about a new dataset: a kernel over their meta-features.

Before a study has results, its metric scale is unknown (a 77-class intent set and a binary
sentiment set reach very different accuracies with the same configuration), so a prediction in
metric units borrows the scales of the history tasks. Tasks whose descriptors are close to the new
dataset's (standardised by the history's spread, squared-exponential kernel, bandwidth = the median
distance) count more; the weights sum to one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .history import Task


def task_weights(descriptors: Mapping[str, Any], history: Sequence[Task]) -> np.ndarray:
    """One weight per history task (uniform when no numeric descriptor is shared)."""
    n = len(history)
    if n == 0:
        return np.zeros(0)
    standardised = _standardised(descriptors, history)
    if standardised is None:
        return np.full(n, 1.0 / n)
    table, centre = standardised
    distance = np.sqrt(((table - centre) ** 2).sum(axis=1))
    bandwidth = float(np.median(distance)) or 1.0
    weights = np.exp(-0.5 * (distance / bandwidth) ** 2)
    return np.asarray(weights / weights.sum())


def _standardised(
    descriptors: Mapping[str, Any], history: Sequence[Task]
) -> tuple[np.ndarray, np.ndarray] | None:
    """The history's numeric descriptors that ``descriptors`` shares, standardised by the
    history's spread, and ``descriptors`` on that scale (None: nothing shared that varies)."""
    keys = sorted(
        key
        for key, value in descriptors.items()
        if _number(value) and all(_number(t.descriptors.get(key)) for t in history)
    )
    if not keys:
        return None
    table = np.array([[float(t.descriptors[key]) for key in keys] for t in history])
    spread = table.std(axis=0)
    keep = spread > 0
    if not keep.any():
        return None
    centre = np.array([float(descriptors[key]) for key in keys])
    return table[:, keep] / spread[keep], centre[keep] / spread[keep]


CLOSE_QUANTILE = (
    0.9  # evidence is close when the nearest dataset is as near as 9 in 10 are to theirs
)


@dataclass(frozen=True)
class Evidence:
    """How close the knowledge base's nearest dataset is to a new one."""

    nearest: str | None
    close: bool

    def note(self) -> str | None:
        """What a user is told when the knowledge base has nothing near (None when it has)."""
        if self.close:
            return None
        where = f" (its nearest, {self.nearest}, is further off" if self.nearest else " ("
        return (
            "no close evidence: the knowledge base holds no dataset near this one"
            f"{where} than 9 in 10 of its datasets are from their nearest); this is the "
            "portfolio's choice"
        )


def evidence(descriptors: Mapping[str, Any], history: Sequence[Task]) -> Evidence:
    """Whether the nearest history task is as close to ``descriptors`` as the history's tasks are
    to their own nearest neighbours (at most their :data:`CLOSE_QUANTILE` distance)."""
    if len(history) < 3:
        return Evidence(history[0].name if history else None, close=False)
    standardised = _standardised(descriptors, history)
    if standardised is None:  # the history's tasks look alike: nothing tells one from the other
        return Evidence(None, close=True)
    table, centre = standardised
    to_new = np.sqrt(((table - centre) ** 2).sum(axis=1))
    between = np.sqrt(((table[:, None, :] - table[None, :, :]) ** 2).sum(axis=-1))
    np.fill_diagonal(between, np.inf)
    typical = float(np.quantile(between.min(axis=1), CLOSE_QUANTILE))
    nearest = int(np.argmin(to_new))
    return Evidence(history[nearest].name, close=bool(to_new[nearest] <= typical))


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
