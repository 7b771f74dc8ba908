"""The 80 % interval a recommendation publishes, calibrated on the knowledge base itself.

Before a study has results, a prediction reads the model's normal score through the history
tasks' scales (:meth:`.recommender.Recommender.to_metric`); its ± holds the model's uncertainty and
how much those scales disagree. Whether that ± is too wide or too narrow is measured on the
history, one dataset left out at a time: each history task's measured configurations are
predicted as a new dataset's would be (its descriptors; the other tasks' scales and sources, its
own source weighted 0), and the factor that puts 80 % of its results inside predicted ± factor x
std is the recommender's (a split-conformal quantile over every left-out result). A prediction's
interval is then predicted ± factor x std, clipped to the metric's range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

COVERAGE = 0.8
Z80 = 1.2815515655446004  # the normal's 90 % quantile: predicted ± Z80 x std holds 80 %


class HeldOut(NamedTuple):
    """One measured run of a history task, predicted as if its dataset were new."""

    achieved: float
    predicted: float
    std: float


def conformal_factor(
    residuals: Sequence[float], stds: Sequence[float], coverage: float = COVERAGE
) -> float | None:
    """The factor ``f`` with ``|residual| <= f x std`` for ``coverage`` of the pairs (the
    finite-sample conformal quantile); None without pairs."""
    if not len(residuals):
        return None
    ratios = np.abs(np.asarray(residuals, dtype=float)) / np.maximum(
        np.asarray(stds, dtype=float), 1e-9
    )
    n = len(ratios)
    level = min(1.0, math.ceil((n + 1) * coverage) / n)
    return float(np.quantile(ratios, level, method="higher"))


def interval(
    predicted: float, std: float, factor: float, low: float | None, high: float | None
) -> tuple[float, float]:
    """``predicted ± factor x std``, clipped to ``[low, high]`` where the metric has bounds."""
    lower, upper = predicted - factor * std, predicted + factor * std
    if low is not None:
        lower = max(low, lower)
    if high is not None:
        upper = min(high, upper)
    return round(lower, 4), round(upper, 4)
