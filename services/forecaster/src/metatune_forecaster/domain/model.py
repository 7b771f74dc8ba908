"""The carbon-intensity model: three gradient-boosted trees over the relative features.

The trees learn how ``intensity / scale`` (``scale`` = mean of the last week) departs from the
7-day same-hour mean (:func:`base_of`), so they spend their splits on what the weather and the
recent days change rather than on reproducing the daily profile. The median and the 10th / 90th
percentiles are each a :class:`~sklearn.ensemble.HistGradientBoostingRegressor` with a quantile loss;
their interval is then widened or narrowed per lead bucket so that it holds its nominal coverage
on the most recent part of the training period (split conformal calibration).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor

from metatune.errors import ConfigurationError

from .features import FEATURE_NAMES

QUANTILES = (0.1, 0.5, 0.9)
LEAD_BUCKETS = ((1, 24), (25, 96), (97, 168))


def bucket_of(lead: np.ndarray) -> np.ndarray:
    """Index into :data:`LEAD_BUCKETS` of every lead."""
    return np.searchsorted([hi for _, hi in LEAD_BUCKETS], np.asarray(lead), side="left")


def base_of(features: pd.DataFrame) -> np.ndarray:
    """The baseline the trees correct: the 7-day same-hour mean, else the last same hour, else 1."""
    base = features["mean7"].to_numpy(dtype=float)
    base = np.where(np.isfinite(base), base, features["naive24"].to_numpy(dtype=float))
    return np.where(np.isfinite(base), base, 1.0)


def _regressor(quantile: float, max_iter: int, seed: int) -> HistGradientBoostingRegressor:
    return HistGradientBoostingRegressor(
        loss="quantile", quantile=quantile, max_iter=max_iter, learning_rate=0.08,
        max_leaf_nodes=31, min_samples_leaf=200, l2_regularization=1.0,
        early_stopping=False, random_state=seed,
    )


class ModelArtifactError(ConfigurationError):
    """A model file that cannot be used: missing, unreadable or built for other features."""


@dataclass
class CarbonModel:
    """Fitted trees plus the per-bucket interval scales and a description for the model card."""

    lower: HistGradientBoostingRegressor
    median: HistGradientBoostingRegressor
    upper: HistGradientBoostingRegressor
    interval_scales: np.ndarray  # shape (len(LEAD_BUCKETS), 2): (below-median, above-median) factors
    version: str
    metadata: dict = field(default_factory=dict)

    def predict(self, features: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p10, median, p90) of ``intensity / scale`` for every feature row, ordered and >= 0."""
        x = features[FEATURE_NAMES]
        base = base_of(features)
        median = self.median.predict(x)
        mid = np.maximum(base + median, 0.0)
        below = np.maximum(median - self.lower.predict(x), 0.0)
        above = np.maximum(self.upper.predict(x) - median, 0.0)
        scales = self.interval_scales[bucket_of(features["lead_h"].to_numpy())]
        low = np.maximum(mid - below * scales[:, 0], 0.0)
        high = mid + above * scales[:, 1]
        return low, mid, high

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump(self, path, compress=("xz", 6))

    @classmethod
    def load(cls, path: Path) -> CarbonModel:
        try:
            model = joblib.load(path)
        except (OSError, EOFError, ValueError, ImportError, AttributeError) as exc:
            raise ModelArtifactError(f"cannot load the forecaster model {path}: {exc}") from exc
        if not isinstance(model, cls):
            raise ModelArtifactError(f"{path} holds a {type(model).__name__}, not a CarbonModel")
        if list(model.median.feature_names_in_) != FEATURE_NAMES:
            raise ModelArtifactError(f"{path} was trained on other features; retrain it")
        return model


def fit(
    features: pd.DataFrame,
    ratio: np.ndarray,
    calibration: np.ndarray,
    version: str,
    max_iter: int = 200,
    seed: int = 0,
    metadata: dict | None = None,
) -> CarbonModel:
    """Fit the three quantile trees on the rows not in ``calibration`` and calibrate the interval
    on those that are (the latest hours of each region's training period)."""
    x, y = features[FEATURE_NAMES], np.asarray(ratio, dtype=float)
    residual = y - base_of(features)
    fit_rows = ~calibration
    lower, median, upper = (_regressor(q, max_iter, seed).fit(x[fit_rows], residual[fit_rows]) for q in QUANTILES)
    uncalibrated = CarbonModel(lower, median, upper, np.ones((len(LEAD_BUCKETS), 2)), version)
    low, mid, high = uncalibrated.predict(features[calibration])
    scales = _interval_scales(y[calibration], low, mid, high, features["lead_h"].to_numpy()[calibration])
    return CarbonModel(lower, median, upper, scales, version, dict(metadata or {}))


def _interval_scales(y: np.ndarray, low: np.ndarray, mid: np.ndarray, high: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """Factors on each half-width that put 10 % of held-out values below p10 and 10 % above p90."""
    buckets = bucket_of(lead)
    scales = np.ones((len(LEAD_BUCKETS), 2))
    for b in range(len(LEAD_BUCKETS)):
        rows = buckets == b
        if rows.sum() < 50:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            need_below = (mid[rows] - y[rows]) / np.maximum(mid[rows] - low[rows], 1e-6)
            need_above = (y[rows] - mid[rows]) / np.maximum(high[rows] - mid[rows], 1e-6)
        # the 90th percentile of the needed factor, among values on that side (both sides hold ~half)
        scales[b, 0] = np.quantile(np.where(y[rows] < mid[rows], need_below, 0.0), 1 - QUANTILES[0])
        scales[b, 1] = np.quantile(np.where(y[rows] > mid[rows], need_above, 0.0), QUANTILES[2])
    return np.clip(scales, 0.25, 4.0)
