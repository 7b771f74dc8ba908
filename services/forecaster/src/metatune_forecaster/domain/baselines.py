"""Naive forecasts every model must beat, on the same (issue position, lead) grid as the model.

An issue at position ``i`` knows hours ``< i``; lead ``h`` (1..168) targets hour ``i + h - 1``.
"""

from __future__ import annotations

import warnings

import numpy as np


def at(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``values[positions]``, NaN where a position falls outside the array."""
    inside = (positions >= 0) & (positions < len(values))
    return np.where(inside, values[np.clip(positions, 0, len(values) - 1)], np.nan)


def days_back(lead: np.ndarray) -> np.ndarray:
    """Whole days to step back from the target hour to reach an hour already observed."""
    return -(-np.asarray(lead) // 24)


def seasonal_naive_24h(y: np.ndarray, issue: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """The same hour on the latest observed day (24 h earlier for leads up to 24 h)."""
    return at(y, issue + lead - 1 - 24 * days_back(lead))


def seasonal_naive_168h(y: np.ndarray, issue: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """The same hour one week earlier."""
    return at(y, issue + lead - 1 - 168)


def same_hours(y: np.ndarray, issue: np.ndarray, lead: np.ndarray, days: int) -> np.ndarray:
    """(days, rows) values of the target's hour on the latest ``days`` observed days (NaN if unknown)."""
    target = issue + lead - 1
    back = days_back(lead)
    return np.stack([at(y, target - 24 * (back + k)) for k in range(days)])


def same_hour_mean(y: np.ndarray, issue: np.ndarray, lead: np.ndarray, days: int = 7) -> np.ndarray:
    """Mean of the same hour over the latest ``days`` observed days."""
    stacked = same_hours(y, issue, lead, days)
    with np.errstate(invalid="ignore"):
        counts = np.isfinite(stacked).sum(axis=0)
        return np.where(counts > 0, np.nansum(stacked, axis=0) / np.maximum(counts, 1), np.nan)


def same_hour_median(
    y: np.ndarray, issue: np.ndarray, lead: np.ndarray, days: int = 7
) -> np.ndarray:
    """Median of the same hour over the latest ``days`` observed days."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an issue with no observed same hour: NaN
        return np.asarray(np.nanmedian(same_hours(y, issue, lead, days), axis=0))


BASELINES = {
    "naive-24h": seasonal_naive_24h,
    "naive-168h": seasonal_naive_168h,
    "mean-7d": same_hour_mean,
}
