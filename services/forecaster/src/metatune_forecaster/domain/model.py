"""The carbon-intensity model: one gradient-boosted tree per lead block, with calibrated intervals.

Each block (1-24, 25-96, 97-168 h) has its own trees, trained on many more rows of its own leads
than one model over the whole horizon would see: the short block learns how the last hours carry
on, the long blocks lean on the daily profile and the weather. The trees learn how
``intensity / scale`` (``scale`` = mean of the last week) departs from the 7-day same-hour mean
(:func:`base_of`), divided by the grid's *volatility* (:func:`volatility_of`: how far that
7-day mean has lately been off). In those units a correction means the same on a flat grid as on
a windy one, so trees fitted on windy grids do not add noise to flat ones. The loss is the
absolute error weighted by ``1 / intensity`` (capped at 1 / 0.3 of the week's mean), which is MAPE,
the metric the forecasts are judged by, without letting near-zero hours drag the level down.

The 10-90 % interval is split-conformal: the 10th and 90th percentiles of the normalised error on
the latest part of each region's training period (never fitted on), per lead band and volatility
band, times the volatility of the issue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor

from metatune.errors import ConfigurationError

from .features import FEATURE_NAMES, MIN_VOLATILITY
from .weather_error import WeatherErrorModel

QUANTILES = (0.1, 0.9)
LEAD_BUCKETS = ((1, 24), (25, 96), (97, 168))
INTERVAL_LEAD_EDGES = (6, 24, 48, 96, 168)  # upper leads of the interval's lead bands
INTERVAL_VOLATILITY_EDGES = (0.015, 0.03, 0.06, 0.12, 0.25)  # band edges of volatility_of
MIN_RATIO_WEIGHT = (
    0.3  # 1 / intensity weights stop growing below 30 % of the week's mean (near-zero hours
)
# would otherwise pull the median of grids like Ontario's down and cost weighted MAPE)
# per block: (iterations as a multiple of ``max_iter``, leaves per tree). The day-ahead block has the
# most rows and the most structure (the last hours carry on); more capacity only overfits the others.
BLOCK_CAPACITY = ((3.0, 63), (1.0, 31), (1.0, 31))
# each block averages this many trees, each choosing every split among a random share of the
# features: the members' errors partly cancel (measured on regions the model never saw: see README)
ENSEMBLE_SIZE = 3
FEATURE_SHARE = 0.6
# features a block's trees leave out: the 14-day level and the 7-day median help the 25-168 h blocks
# but cost the day-ahead block, which leans on the latest hours (README, session 8). Blocks are
# independent (own trees, own interval lead bands, own recalibration), so this is exact
LEVEL_FEATURES = frozenset(
    {"mean14_vs_mean7", "mean14_vs_mean7_z", "median7_vs_mean7", "median7_vs_mean7_z"}
)
BLOCK_EXCLUDED_FEATURES: tuple[frozenset[str], ...] = (LEVEL_FEATURES, frozenset(), frozenset())
MIN_BAND_ROWS = 50


def bucket_of(lead: np.ndarray) -> np.ndarray:
    """Index into :data:`LEAD_BUCKETS` of every lead."""
    return np.searchsorted([hi for _, hi in LEAD_BUCKETS], np.asarray(lead), side="left")


def block_features(block: int) -> list[str]:
    """The feature columns the trees of lead block ``block`` are trained on, in order."""
    return [name for name in FEATURE_NAMES if name not in BLOCK_EXCLUDED_FEATURES[block]]


def base_of(features: pd.DataFrame) -> np.ndarray:
    """The baseline the trees correct: the 7-day same-hour mean, else the last same hour, else 1."""
    base = features["mean7"].to_numpy(dtype=float)
    base = np.where(np.isfinite(base), base, features["naive24"].to_numpy(dtype=float))
    return np.where(np.isfinite(base), base, 1.0)


def volatility_of(features: pd.DataFrame) -> np.ndarray:
    """The unit of the trees' corrections: the mean absolute error of the 7-day same-hour mean over
    the last two weeks, relative to ``scale`` (0.007 on Singapore's grid, 0.4 on Norway's)."""
    volatility = features["skill_mean7"].to_numpy(dtype=float)
    return np.maximum(np.where(np.isfinite(volatility), volatility, 0.1), MIN_VOLATILITY)


def _interval_band(features: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    lead = np.searchsorted(INTERVAL_LEAD_EDGES, features["lead_h"].to_numpy(), side="left")
    volatility = np.searchsorted(INTERVAL_VOLATILITY_EDGES, volatility_of(features), side="left")
    return np.minimum(lead, len(INTERVAL_LEAD_EDGES) - 1), volatility


def _regressor(max_iter: int, leaves: int, seed: int) -> HistGradientBoostingRegressor:
    return HistGradientBoostingRegressor(
        loss="quantile",
        quantile=0.5,
        max_iter=max_iter,
        learning_rate=0.08,
        max_leaf_nodes=leaves,
        min_samples_leaf=200,
        l2_regularization=1.0,
        max_features=FEATURE_SHARE,
        early_stopping=False,
        random_state=seed,
    )


@dataclass(frozen=True)
class TreeEnsemble:
    """The median trees of one lead block: the mean of members fitted with different feature draws."""

    members: tuple[HistGradientBoostingRegressor, ...]

    @property
    def feature_names_in_(self) -> np.ndarray:
        return np.asarray(self.members[0].feature_names_in_)

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        """Mean prediction of the members, on the columns they were trained on."""
        x = x[list(self.feature_names_in_)]
        return np.asarray(np.mean([member.predict(x) for member in self.members], axis=0))

    @classmethod
    def fit(
        cls,
        x: pd.DataFrame,
        target: np.ndarray,
        weight: np.ndarray,
        max_iter: int,
        leaves: int,
        seed: int,
        size: int = ENSEMBLE_SIZE,
    ) -> TreeEnsemble:
        return cls(
            tuple(
                _regressor(max_iter, leaves, seed + k).fit(x, target, sample_weight=weight)
                for k in range(size)
            )
        )


class ModelArtifactError(ConfigurationError):
    """A model file that cannot be used: missing, unreadable or built for other features."""


@dataclass(frozen=True)
class BlockRows:
    """Training rows of one lead block: features, target ``intensity / scale``, and which rows
    belong to the calibration slice (the latest issues of each region) rather than the fit."""

    features: pd.DataFrame
    ratio: np.ndarray
    calibration: np.ndarray


@dataclass
class CarbonModel:
    """Per-block median trees plus the interval table and a description for the model card."""

    blocks: list[TreeEnsemble]  # one per LEAD_BUCKETS
    interval: (
        np.ndarray
    )  # (lead bands, volatility bands + 1, 2): p10 and p90 of the normalised error
    version: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def predict_median(self, features: pd.DataFrame) -> np.ndarray:
        """Median of ``intensity / scale`` for every feature row, >= 0."""
        x = features[FEATURE_NAMES]
        correction = np.zeros(len(features))
        buckets = bucket_of(features["lead_h"].to_numpy())
        for b, trees in enumerate(self.blocks):
            rows = buckets == b
            if rows.any():
                correction[rows] = trees.predict(x[rows])
        return np.maximum(base_of(features) + volatility_of(features) * correction, 0.0)

    def predict(self, features: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p10, median, p90) of ``intensity / scale`` for every feature row, ordered and >= 0."""
        mid = self.predict_median(features)
        lead_band, volatility_band = _interval_band(features)
        error = self.interval[lead_band, volatility_band] * volatility_of(features)[:, None]
        low = np.clip(mid + error[:, 0], 0.0, mid)
        high = np.maximum(mid + error[:, 1], mid)
        return low, mid, high

    def weather_error(self) -> WeatherErrorModel:
        """The forecast-quality degradation the model was trained with (used to re-forecast past
        issues at serving time the way they would have been forecast)."""
        return WeatherErrorModel.model_validate(self.metadata["weather_error"])


def checked(model: object, source: str) -> CarbonModel:
    """``model`` (unpickled from ``source``) if it is a :class:`CarbonModel` of this layout and
    these features; else a :class:`ModelArtifactError` that says what to do."""
    if not isinstance(model, CarbonModel) or not hasattr(model, "blocks"):
        raise ModelArtifactError(
            f"{source} holds a {type(model).__name__} of another layout, not a CarbonModel"
        )
    if not all(isinstance(trees, TreeEnsemble) for trees in model.blocks):
        raise ModelArtifactError(f"{source} holds trees of an older layout; retrain it")
    if any(
        list(trees.feature_names_in_) != block_features(b) for b, trees in enumerate(model.blocks)
    ):
        raise ModelArtifactError(f"{source} was trained on other features; retrain it")
    if "weather_error" not in model.metadata:
        raise ModelArtifactError(f"{source} does not record its weather-error model; retrain it")
    return model


def fit(
    blocks: list[BlockRows],
    version: str,
    max_iter: int = 200,
    seed: int = 0,
    metadata: dict[str, Any] | None = None,
    ensemble_size: int = ENSEMBLE_SIZE,
) -> CarbonModel:
    """Fit each block's trees on its rows outside the calibration slice, then the interval table on
    the calibration rows of every block."""
    if len(blocks) != len(LEAD_BUCKETS):
        raise ValueError(f"need rows for {len(LEAD_BUCKETS)} lead blocks, got {len(blocks)}")
    trees = []
    for b, (rows, (iterations, leaves)) in enumerate(zip(blocks, BLOCK_CAPACITY, strict=True)):
        fit_rows = ~rows.calibration
        features = rows.features[fit_rows]
        ratio = rows.ratio[fit_rows]
        target = (ratio - base_of(features)) / volatility_of(features)
        weight = 1.0 / np.maximum(ratio, MIN_RATIO_WEIGHT)
        trees.append(
            TreeEnsemble.fit(
                features[block_features(b)],
                target,
                weight,
                round(iterations * max_iter),
                leaves,
                seed,
                ensemble_size,
            )
        )
    model = CarbonModel(
        trees, np.zeros((len(INTERVAL_LEAD_EDGES), len(INTERVAL_VOLATILITY_EDGES) + 1, 2)), version
    )
    calibration = pd.concat([rows.features[rows.calibration] for rows in blocks], ignore_index=True)
    ratio = np.concatenate([rows.ratio[rows.calibration] for rows in blocks])
    error = (ratio - model.predict_median(calibration)) / volatility_of(calibration)
    model.interval = _interval_table(error, *_interval_band(calibration))
    model.metadata = dict(metadata or {})
    return model


def _interval_table(
    error: np.ndarray, lead_band: np.ndarray, volatility_band: np.ndarray
) -> np.ndarray:
    """p10 / p90 of the normalised error per (lead band, volatility band); a band with too few rows
    takes its lead band's pooled value."""
    table = np.zeros((len(INTERVAL_LEAD_EDGES), len(INTERVAL_VOLATILITY_EDGES) + 1, 2))
    for lead in range(table.shape[0]):
        in_lead = lead_band == lead
        pooled = (
            np.quantile(error[in_lead], QUANTILES)
            if in_lead.sum() >= MIN_BAND_ROWS
            else np.quantile(error, QUANTILES)
        )
        for volatility in range(table.shape[1]):
            rows = in_lead & (volatility_band == volatility)
            table[lead, volatility] = (
                np.quantile(error[rows], QUANTILES) if rows.sum() >= MIN_BAND_ROWS else pooled
            )
    return table
