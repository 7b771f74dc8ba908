"""What the plan takes a forecast to say: its hourly bands from the plan's hour on, the 10-90 %
interval widened where the forecast knows less than its bands claim, and their expected value.

The plan minimises expected emissions, so an interval matters through the expected intensity
(:func:`metatune.contracts.forecasts.expected_intensity`, 0.3 p10 + 0.4 p50 + 0.3 p90). Widening
keeps the median and scales both offsets from it, the lower bound kept at or above 0: the same
operation as the forecaster's own recalibration (``Recalibration.apply``). A symmetric interval
widened has the same expected value; a right-skewed one (upward spikes), or one whose lower bound
meets 0 (a clean grid), gets a higher one, so the plan prefers that grid less, as it should.

Two flags of a forecast, one rule each, multiplied where both hold:

* **Hours past the forecast's horizon** (a lead over 168 h from ``issued_at``) are its last day
  repeated, not forecast: the tail a stale forecast was continued with (the forecaster shifts the
  last good one and keeps its ``issued_at``), or the days the scheduler repeats when it holds an
  older forecast. Their offsets are widened by :data:`REPEATED_DAY_WIDTHS`, by how many days the
  hour is past the horizon, so the older the forecast, the more of the plan's hours are widened
  and the more. The hours still inside the horizon are not: their bands were made for their true
  lead from the issue, and the forecaster's intervals are calibrated per lead (79.5 / 79.7 / 78.9 %
  at 1-24 / 25-72 / 73-168 h in the forecaster bench).
* **Short history** (``short_history``: under 90 % of the model's 8 weeks): the forecaster's
  per-issue recalibration of the interval scores the last four weeks, so such a forecast's
  interval is recalibrated on fewer hours, or (days of history) is the model's static one. Its
  offsets are widened by :data:`SHORT_HISTORY_WIDTH`, the static interval's worst case.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from metatune.contracts import CarbonForecast
from metatune.contracts.forecasts import HORIZON_HOURS, expected_intensity

from .horizon import epoch_hour

# An hour 1, 2, 3 or more days past the horizon: the factor its repeated band's 80 % interval
# needed over the one the same band needed on its own hours, median of 17 regions
# (docs/results/stale_interval_bench.json; from the third day on it stops growing: the median of
# days 3-7, 1.121 / 1.144 / 1.114 / 1.120 / 1.102).
REPEATED_DAY_WIDTHS = (1.051, 1.085, 1.12)
# The model's static (not recalibrated) interval covered as little as 71.7 % (1-24 h, the same
# bench); with normal errors an 80 % interval is z(0.90) / z(0.8585) = 1.19 times as wide.
SHORT_HISTORY_WIDTH = 1.19


def hourly_from(values: ArrayLike, start_hour: int, hour: int, horizon: int) -> np.ndarray:
    """Forecast values from ``hour`` on, ``horizon`` long; past its end, the last day repeats."""
    series = np.asarray(values, dtype=float)
    offset = hour - start_hour
    if offset < 0:
        series = np.concatenate([np.full(-offset, series[0]), series])
        offset = 0
    out = series[offset:]
    day = series[-24:]
    while len(out) < horizon:
        out = np.concatenate([out, day])
    return out[:horizon]


def interval_widths(forecast: CarbonForecast, hour: int, horizon: int) -> np.ndarray:
    """(horizon,) factor on both interval offsets of each hour from ``hour`` on (see the module doc)."""
    lead = hour - epoch_hour(forecast.issued_at) + np.arange(1, horizon + 1)
    days_past = np.clip((lead - HORIZON_HOURS + 23) // 24, 0, len(REPEATED_DAY_WIDTHS))
    widths = np.array([1.0, *REPEATED_DAY_WIDTHS])[days_past]
    return widths * (SHORT_HISTORY_WIDTH if forecast.short_history else 1.0)


def planning_bands(
    forecast: CarbonForecast, hour: int, horizon: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p10, median, p90) of each hour from ``hour`` on, ``horizon`` long, the interval widened."""
    start = epoch_hour(forecast.start)
    low, mid, high = (
        hourly_from(band, start, hour, horizon)
        for band in (forecast.p10_g_per_kwh, forecast.g_per_kwh, forecast.p90_g_per_kwh)
    )
    widths = interval_widths(forecast, hour, horizon)
    return np.clip(mid + widths * (low - mid), 0.0, mid), mid, mid + widths * (high - mid)


def planned_intensity(forecast: CarbonForecast, hour: int, horizon: int) -> np.ndarray:
    """The expected intensity the plan minimises, of each hour from ``hour`` on."""
    return expected_intensity(*planning_bands(forecast, hour, horizon))
