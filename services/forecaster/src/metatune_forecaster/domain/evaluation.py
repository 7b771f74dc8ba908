"""Accuracy of a forecast against the actual intensity: MAPE, weighted MAPE, interval coverage."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_ACTUAL_G = 1.0  # hours with a smaller actual are left out of MAPE (it explodes near zero)
# Lead buckets the 10-90 % interval's coverage is reported in (day ahead, the next two days, the
# rest of the week): how a scheduler reads a forecast, not the model's own lead blocks.
COVERAGE_LEADS = ((1, 24), (25, 72), (73, 168))


def mape(predicted: np.ndarray, actual: np.ndarray) -> float:
    """Mean absolute percentage error, %, over hours with actual >= 1 g/kWh."""
    ok = np.isfinite(predicted) & np.isfinite(actual) & (actual >= MIN_ACTUAL_G)
    return (
        float(100 * np.mean(np.abs(predicted[ok] - actual[ok]) / actual[ok]))
        if ok.any()
        else float("nan")
    )


def wmape(predicted: np.ndarray, actual: np.ndarray) -> float:
    """Weighted MAPE, %: sum |error| / sum |actual| (robust on grids near zero)."""
    ok = np.isfinite(predicted) & np.isfinite(actual)
    total = np.sum(np.abs(actual[ok]))
    return (
        float(100 * np.sum(np.abs(predicted[ok] - actual[ok])) / total)
        if total > 0
        else float("nan")
    )


def coverage(low: np.ndarray, high: np.ndarray, actual: np.ndarray) -> float:
    """Share of actual values inside [low, high], %."""
    ok = np.isfinite(low) & np.isfinite(high) & np.isfinite(actual)
    return (
        float(100 * np.mean((actual[ok] >= low[ok]) & (actual[ok] <= high[ok])))
        if ok.any()
        else float("nan")
    )


def coverage_hits(
    lead: np.ndarray, low: np.ndarray, high: np.ndarray, actual: np.ndarray
) -> np.ndarray:
    """Per bucket of :data:`COVERAGE_LEADS`, (hours inside [low, high], hours scored): counts, so
    that regions and issues can be pooled before the share is taken."""
    ok = np.isfinite(low) & np.isfinite(high) & np.isfinite(actual)
    inside = ok & (actual >= np.where(ok, low, 0.0)) & (actual <= np.where(ok, high, 0.0))
    out = np.zeros((len(COVERAGE_LEADS), 2), dtype=np.int64)
    for b, (first, last) in enumerate(COVERAGE_LEADS):
        rows = (lead >= first) & (lead <= last)
        out[b] = int(np.sum(inside & rows)), int(np.sum(ok & rows))
    return out


@dataclass(frozen=True)
class Score:
    mape: float
    wmape: float

    @classmethod
    def of(cls, predicted: np.ndarray, actual: np.ndarray) -> Score:
        return cls(mape(predicted, actual), wmape(predicted, actual))


def improvement(model: float, baseline: float) -> float:
    """Relative reduction of an error, % (positive: the model is better)."""
    return float(100 * (baseline - model) / baseline) if baseline > 0 else float("nan")
