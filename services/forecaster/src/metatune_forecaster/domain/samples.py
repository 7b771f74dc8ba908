"""Issue times, forecast weather and feature rows for training and back-testing.

An issue never sees intensity or observed weather at or after its own hour; observed weather is
replaced by forecast-quality weather (:mod:`.weather_error`) at the target hours, archived GFS
forecasts are used as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .features import HORIZON, WEEK, ForecastWeather, RegionArrays
from .solar import cloudy_ghi
from .weather_error import WeatherErrorModel

MIN_HISTORY = 2 * WEEK  # hours of intensity an issue needs before it (same-hour means over 7 days)


@dataclass(frozen=True)
class Grid:
    """Rows of one region: the issue position and lead of each, with their feature frame."""

    arrays: RegionArrays
    issue: np.ndarray
    lead: np.ndarray
    features: pd.DataFrame

    @property
    def target(self) -> np.ndarray:
        return np.asarray(self.issue + self.lead - 1)

    def actual(self) -> np.ndarray:
        return np.asarray(self.arrays.y[self.target])

    def scale(self) -> np.ndarray:
        return self.arrays.scale(self.issue)


def issue_positions(
    arrays: RegionArrays, start: pd.Timestamp | None, end: pd.Timestamp | None, stride_h: int
) -> np.ndarray:
    """Issue positions every ``stride_h`` hours whose whole 168 h horizon lies in [start, end)."""
    times = arrays.times
    first = MIN_HISTORY if start is None else max(MIN_HISTORY, int(times.searchsorted(start)))
    stop = len(times) if end is None else int(times.searchsorted(end))
    return np.arange(first, stop - HORIZON + 1, stride_h, dtype=np.int64)


def forecast_weather(
    arrays: RegionArrays,
    issues: np.ndarray,
    error_model: WeatherErrorModel,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(temperature, wind speed, irradiance) a forecast issued at each issue would have had,
    each shaped (n_issues, 168)."""
    frame = arrays.series.frame
    targets = issues[:, None] + np.arange(HORIZON)[None, :]

    def pick(column: str) -> np.ndarray:
        return np.asarray(frame[column].to_numpy(dtype=float)[targets])

    if arrays.series.weather_is_forecast:
        return pick("temperature_c"), pick("wind_ms"), pick("ghi_wm2")
    temperature, wind, cloud = error_model.degrade(
        pick("temperature_c"), pick("wind_ms"), pick("cloud_pct"), rng
    )
    return temperature, wind, cloudy_ghi((arrays.clear_sky * 1000.0)[targets], cloud)


def build_grid(
    arrays: RegionArrays,
    issues: np.ndarray,
    error_model: WeatherErrorModel,
    rng: np.random.Generator,
    leads_per_issue: int = HORIZON,
    lead_range: tuple[int, int] = (1, HORIZON),
) -> Grid:
    """Feature rows for ``issues``: every lead of ``lead_range`` (inclusive), or ``leads_per_issue``
    random leads of it for each issue."""
    temperature, wind, ghi = forecast_weather(arrays, issues, error_model, rng)
    first, last = lead_range
    width = last - first + 1
    if leads_per_issue >= width:
        lead_index = np.tile(np.arange(first - 1, last), (len(issues), 1))
    else:
        lead_index = (
            first - 1 + np.argsort(rng.random((len(issues), width)), axis=1)[:, :leads_per_issue]
        )
    row_issue = np.repeat(np.arange(len(issues)), lead_index.shape[1])
    col = lead_index.ravel()
    weather = ForecastWeather(
        temperature[row_issue, col], wind[row_issue, col], ghi[row_issue, col]
    )
    issue = issues[row_issue]
    lead = col + 1
    return Grid(arrays, issue, lead, arrays.features(issue, lead, weather))
