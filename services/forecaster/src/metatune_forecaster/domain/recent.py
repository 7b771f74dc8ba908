"""Issue-time recalibration from the model's own recent forecasts of the region.

At each issue the forecasts the model *would have issued* on this region over the last four weeks
(one every :data:`BACKTEST_STRIDE_H` hours, each from its own history and forecast-quality weather)
are scored on the hours already observed. Per lead block (1-24, 25-96, 97-168 h) that gives two
corrections, both shrunk towards the unadjusted model:

* **Median: a stacking weight** between the trees and the 7-day same-hour mean they correct. The
  trees minimise MAPE over all grids; on a flat grid (Singapore, South Africa) their correction is
  mostly noise and the 7-day mean is as good, and on a grid with near-zero hours (Ontario) the
  MAPE weighting pulls the level down and costs weighted MAPE. The weight chosen is the one whose
  worse ratio to the 7-day mean, of MAPE and of weighted MAPE, was lowest over the window (it
  favours weights that beat that mean on both metrics), keeping only BLEND_SHRINK of its departure
  from the trees alone: four weeks are a noisy sample.
* **Interval: one width factor** for both offsets, the one that would have given nominal 80 %
  coverage in the window (the 80th percentile, over the scored hours, of the factor each hour's
  error needed to fall inside), moved part of the way back to 1. The model's interval table is
  split-conformal over all training grids: right on average, too narrow in a volatile spell, too
  wide once a grid goes quiet. This is a locally adaptive conformal step in the spirit of Gibbs &
  Candès' adaptive conformal inference, without a recursive state: the service forecasts every
  hour from scratch. One factor for both sides, not one per side: four weeks hold only ~25 issues
  per block and an issue's errors move together (a level shift at 97-168 h misses one side for
  days), so a per-side 10 % quantile swings with the last spell's sign and, the band being
  narrowed as often as widened at random, loses coverage on average; the two-sided width is the
  steadier estimate. The interval keeps the table's asymmetry.

Only targets before the issue are scored, so nothing after the issue time is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .features import RECENT_WINDOW, RegionArrays
from .model import LEAD_BUCKETS, QUANTILES, CarbonModel, base_of, bucket_of
from .samples import MIN_HISTORY, build_grid
from .weather_error import WeatherErrorModel

RECENT_WINDOW_H = RECENT_WINDOW  # how far back past issues are re-forecast
BACKTEST_STRIDE_H = (
    25  # hours between those past issues (not a multiple of 24: every hour of the day)
)
MIN_RECENT_ROWS = 48  # scored hours a lead block needs before its interval is rescaled
SHRINK = 0.8  # weight of the recent interval width factor against 1 (the global calibration)
BLEND_SHRINK = (
    0.3  # share of the recent best weight's departure from 1 (the model alone) that is kept
)
BLEND_GRID = np.linspace(
    1.0, 0.0, 11
)  # candidate weights of the trees against the 7-day mean, model first
MIN_MAPE_RATIO = 0.02  # hours below this share of the week's mean are left out of the blend's MAPE
FACTOR_LIMITS = (0.3, 3.0)
MIN_OFFSET = 1e-3  # smallest interval offset (ratio units) a factor is measured against


def past_issues(issue: int) -> np.ndarray:
    """Positions of the past issues re-forecast for an issue at position ``issue``."""
    return issue - BACKTEST_STRIDE_H * np.arange(
        1, RECENT_WINDOW_H // BACKTEST_STRIDE_H + 1, dtype=np.int64
    )


@dataclass(frozen=True)
class PastForecasts:
    """The model's forecasts of past issues of one region, each in its own issue's ratio units
    (intensity / mean of the week before that issue), with the actual ratio where observed."""

    issue: np.ndarray
    lead: np.ndarray
    low: np.ndarray
    mid: np.ndarray
    high: np.ndarray
    base: np.ndarray  # the 7-day same-hour mean the trees correct
    actual: np.ndarray

    def scored_before(self, issue: int) -> PastForecasts:
        """The rows of the window before ``issue`` whose target hour is already observed there."""
        target = self.issue + self.lead - 1
        keep = (
            (self.issue < issue)
            & (self.issue >= issue - RECENT_WINDOW_H)
            & (target < issue)
            & np.isfinite(self.actual)
        )
        return PastForecasts(
            *(
                v[keep]
                for v in (
                    self.issue,
                    self.lead,
                    self.low,
                    self.mid,
                    self.high,
                    self.base,
                    self.actual,
                )
            )
        )


def backtest(
    model: CarbonModel,
    arrays: RegionArrays,
    issues: np.ndarray,
    error_model: WeatherErrorModel,
    rng: np.random.Generator,
) -> PastForecasts:
    """The model's 168 h forecasts at ``issues`` (those with enough history before them), with
    forecast-quality weather, scored against ``arrays``' intensity where it is known."""
    issues = np.unique(np.asarray(issues, dtype=np.int64))
    issues = issues[(issues >= MIN_HISTORY) & (issues < len(arrays.y))]
    grid = build_grid(arrays, issues, error_model, rng)
    low, mid, high = model.predict(grid.features)
    with np.errstate(invalid="ignore", divide="ignore"):
        actual = grid.actual() / grid.scale()
    return PastForecasts(grid.issue, grid.lead, low, mid, high, base_of(grid.features), actual)


def blended(mid: np.ndarray, base: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``weight * mid + (1 - weight) * base``, the model alone where the base is unknown."""
    return np.where(np.isfinite(base), weight * mid + (1.0 - weight) * base, mid)


def _errors(predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """(MAPE, weighted MAPE) of ``predicted``; MAPE leaves out hours below MIN_MAPE_RATIO of the
    week's mean, as the evaluation leaves out near-zero hours."""
    error = np.abs(predicted - actual)
    weighted = np.sum(error) / max(np.sum(np.abs(actual)), 1e-9)
    ok = actual >= MIN_MAPE_RATIO
    plain = np.mean(error[ok] / actual[ok]) if ok.any() else weighted
    return np.array([plain, weighted])


def _blend_losses(mid: np.ndarray, base: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """For each weight of BLEND_GRID, the worse of its MAPE and weighted MAPE relative to the 7-day
    mean's: below 1 means better than that baseline on both metrics."""
    reference = np.maximum(_errors(base, actual), 1e-9)
    return np.array(
        [np.max(_errors(blended(mid, base, w), actual) / reference) for w in BLEND_GRID]
    )


def width_needed(error: np.ndarray, below: np.ndarray, above: np.ndarray) -> float:
    """The factor ``k`` on both offsets (``below`` <= 0 <= ``above``, around the median the errors
    are measured from) whose interval ``[k * below, k * above]`` would have held the nominal share
    (80 %) of ``error``: each hour needs ``error / above`` if it fell above the median, ``error /
    below`` if below; ``k`` is the nominal quantile of those needs."""
    below = np.minimum(below, -MIN_OFFSET)
    above = np.maximum(above, MIN_OFFSET)
    need = np.where(error < 0, error / below, error / above)
    return float(np.quantile(need, QUANTILES[1] - QUANTILES[0]))


@dataclass(frozen=True)
class Recalibration:
    """Per lead block: the trees' weight against the 7-day mean, and the interval width factor."""

    weights: np.ndarray  # (lead blocks,)
    widths: np.ndarray  # (lead blocks,): factor on both interval offsets

    @classmethod
    def none(cls) -> Recalibration:
        return cls(np.ones(len(LEAD_BUCKETS)), np.ones(len(LEAD_BUCKETS)))

    @classmethod
    def learn(cls, past: PastForecasts) -> Recalibration:
        """From the scored rows of the window (:meth:`PastForecasts.scored_before`)."""
        weights, widths = cls.none().weights, cls.none().widths
        blocks = bucket_of(past.lead)
        for b in range(len(LEAD_BUCKETS)):
            rows = blocks == b
            if rows.sum() < MIN_RECENT_ROWS:
                continue
            mid, base, actual = past.mid[rows], past.base[rows], past.actual[rows]
            best = BLEND_GRID[
                int(np.argmin(_blend_losses(mid, base, actual)))
            ]  # a tie keeps the higher weight
            weights[b] = 1.0 - BLEND_SHRINK * (1.0 - best)
            error = actual - blended(mid, base, weights[b])
            recent = width_needed(error, past.low[rows] - mid, past.high[rows] - mid)
            widths[b] = np.clip(SHRINK * recent + (1 - SHRINK), *FACTOR_LIMITS)
        return cls(weights, widths)

    def apply(
        self, low: np.ndarray, mid: np.ndarray, high: np.ndarray, base: np.ndarray, lead: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(low, median, high) of a forecast: the median blended, the interval offsets (taken from
        the model's own median) scaled, ordered and >= 0."""
        blocks = bucket_of(lead)
        new_mid = np.maximum(blended(mid, base, self.weights[blocks]), 0.0)
        new_low = np.clip(new_mid + self.widths[blocks] * (low - mid), 0.0, new_mid)
        new_high = np.maximum(new_mid + self.widths[blocks] * (high - mid), new_mid)
        return new_low, new_mid, new_high
