"""Features of one (issue time, lead) pair, using only what is known at the issue time.

Everything is relative, so one model serves every grid: intensities are divided by the mean of
the last week (``scale``), hours are local solar hours, and the grid's sensitivity to wind and sun
is estimated from its own last four weeks. An issue at position ``i`` of the arrays knows the
intensity and observed weather of hours ``< i``; the forecast covers hours ``i .. i + 167`` and
sees the weather *forecast* for them (passed in per row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .baselines import at as _at
from .baselines import (
    days_back,
    same_hour_mean,
    same_hour_median,
    seasonal_naive_24h,
    seasonal_naive_168h,
)
from .series import RegionSeries
from .solar import local_solar_hour
from .wind import capacity_factor, hub_height_speed

HORIZON = 168
WEEK = 168
SENSITIVITY_WINDOW = 28 * 24
SKILL_WINDOW = 14 * 24  # hours over which the naive forecasts' recent errors are measured
RECENT_WINDOW = 28 * 24  # past issues re-forecast to recalibrate the intervals (see recent.py)
HISTORY_HOURS = (
    SENSITIVITY_WINDOW + RECENT_WINDOW
)  # hours of history an issue needs, its past issues' included
NIGHT_WM2 = 50.0

FEATURE_NAMES = [
    "lead_h",
    "solar_hour",
    "local_weekday",
    "weekend",
    "season",
    "abs_latitude",
    "clear_sky_kwm2",
    "last",
    "last3",
    "mean24",
    "trend_week",
    "std_week",
    "min_week",
    "max_week",
    "anomaly_now",
    "naive24",
    "naive48",
    "naive168",
    "mean7",
    "temperature_c",
    "wind_cf",
    "ghi_kwm2",
    "clearness",
    "d_wind_cf",
    "d_ghi_kwm2",
    "d_temperature_c",
    "wind_cf_vs_week",
    "temperature_vs_week",
    "beta_wind",
    "beta_sun",
    "wind_effect",
    "sun_effect",
    "naive24_vs_mean7",
    "day_change_now",
    "anomaly_decayed",
    "skill_naive24",
    "skill_naive168",
    "skill_mean7",
    "skill_hourly",
    "anomaly_3h",
    "anomaly_24h",
    "slope_1h",
    "slope_3h",
    "anomaly_now_z",
    "anomaly_3h_z",
    "anomaly_decayed_z",
    "naive24_vs_mean7_z",
    "naive168_vs_mean7_z",
    "sun_wind_effect_z",
    "mean28_vs_mean7",
    "mean28_vs_mean7_z",
    "mean14_vs_mean7",
    "mean14_vs_mean7_z",
    "median7_vs_mean7",
    "median7_vs_mean7_z",
]
MIN_VOLATILITY = 0.005  # floor of the volatility unit (see :func:`model.volatility_of`)


@dataclass(frozen=True)
class ForecastWeather:
    """Weather forecast for the target hour of each row (NaN where unknown)."""

    temperature_c: np.ndarray
    wind_ms: np.ndarray
    ghi_wm2: np.ndarray


class _Windows:
    """O(1) NaN-aware window sums over a 1-D array, via cumulative sums."""

    def __init__(self, values: np.ndarray) -> None:
        finite = np.isfinite(values)
        self._sum = np.concatenate([[0.0], np.cumsum(np.where(finite, values, 0.0))])
        self._count = np.concatenate([[0], np.cumsum(finite)])

    def mean(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        start = np.clip(start, 0, len(self._sum) - 1)
        stop = np.clip(stop, 0, len(self._sum) - 1)
        count = self._count[stop] - self._count[start]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, (self._sum[stop] - self._sum[start]) / count, np.nan)


class RegionArrays:
    """A region's history as arrays, with the rolling statistics the features need."""

    def __init__(self, series: RegionSeries) -> None:
        frame = series.frame
        self.series = series
        self.times = frame.index
        self.y = frame["ci"].to_numpy(dtype=float)
        self.temperature = frame["temperature_c"].to_numpy(dtype=float)
        self.wind_cf = capacity_factor(hub_height_speed(frame["wind_ms"].to_numpy(dtype=float)))
        self.ghi = frame["ghi_wm2"].to_numpy(dtype=float) / 1000.0
        self.clear_sky = series.clear_sky() / 1000.0
        self.solar_hour = local_solar_hour(self.times, series.longitude)
        local = self.times + pd.to_timedelta(round(series.longitude / 15.0), unit="h")
        self.weekday = local.day_of_week.to_numpy()
        hemisphere = 1.0 if series.latitude >= 0 else -1.0
        self.season = hemisphere * np.cos(
            2 * np.pi * (self.times.day_of_year.to_numpy() - 172) / 365.25
        )
        self._y = _Windows(self.y)
        self._y2 = _Windows(self.y**2)
        self._wind = _Windows(self.wind_cf)
        self._temperature = _Windows(self.temperature)
        rolling = pd.Series(self.y).rolling(WEEK, min_periods=24)
        self._min = rolling.min().to_numpy()
        self._max = rolling.max().to_numpy()
        self._moments = self._regression_moments()
        self._skill = self._naive_errors()

    def _regression_moments(self) -> dict[str, _Windows]:
        ok = np.isfinite(self.y) & np.isfinite(self.wind_cf) & np.isfinite(self.ghi)
        y, w, g = (np.where(ok, v, np.nan) for v in (self.y, self.wind_cf, self.ghi))
        return {
            name: _Windows(v)
            for name, v in {
                "n": np.where(ok, 1.0, np.nan),
                "y": y,
                "w": w,
                "g": g,
                "ww": w * w,
                "gg": g * g,
                "wg": w * g,
                "wy": w * y,
                "gy": g * y,
            }.items()
        }

    def _naive_errors(self) -> dict[str, _Windows]:
        """Absolute errors the naive forecasts made at every past hour, for windowed means: how
        well this grid's last day, last week, 7-day profile and last hour have lately predicted it."""
        y = self.y
        hours = np.arange(len(y))
        return {
            "naive24": _Windows(np.abs(y - _at(y, hours - 24))),
            "naive168": _Windows(np.abs(y - _at(y, hours - WEEK))),
            "mean7": _Windows(np.abs(y - same_hour_mean(y, hours - 23, np.full_like(hours, 24)))),
            "hourly": _Windows(np.abs(y - _at(y, hours - 1))),
        }

    def sensitivities(self, issue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Least-squares slopes of intensity on wind capacity factor and on irradiance (kW/m²)
        over the four weeks before each issue: how strongly this grid responds to wind and sun."""
        start, stop = issue - SENSITIVITY_WINDOW, issue
        m = {k: w.mean(start, stop) for k, w in self._moments.items()}
        vww = m["ww"] - m["w"] ** 2
        vgg = m["gg"] - m["g"] ** 2
        vwg = m["wg"] - m["w"] * m["g"]
        cwy = m["wy"] - m["w"] * m["y"]
        cgy = m["gy"] - m["g"] * m["y"]
        det = vww * vgg - vwg**2
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = det > 1e-6
            beta_w = np.where(ok, (vgg * cwy - vwg * cgy) / det, np.nan)
            beta_g = np.where(ok, (vww * cgy - vwg * cwy) / det, np.nan)
        return beta_w, beta_g

    # long: one entry per model feature (60), a table read as data; FEATURE_NAMES orders it
    def features(
        self, issue: np.ndarray, lead: np.ndarray, weather: ForecastWeather
    ) -> pd.DataFrame:
        """Feature rows for issues at positions ``issue`` and leads ``lead`` (1..168), one per row."""
        issue = np.asarray(issue, dtype=np.int64)
        lead = np.asarray(lead, dtype=np.int64)
        target = issue + lead - 1
        scale = self._y.mean(issue - WEEK, issue)
        with np.errstate(invalid="ignore", divide="ignore"):
            inv = np.where(scale > 0, 1.0 / scale, np.nan)
        y = self.y
        naive24_pos = target - 24 * days_back(lead)
        now_mean7 = same_hour_mean(y, issue - 24, np.full_like(issue, 24))
        mean24 = self._y.mean(issue - 24, issue)
        std = np.sqrt(np.maximum(self._y2.mean(issue - WEEK, issue) - scale**2, 0.0))
        beta_w, beta_g = self.sensitivities(issue)
        naive24 = seasonal_naive_24h(y, issue, lead) * inv
        mean7 = same_hour_mean(y, issue, lead) * inv
        mean28 = same_hour_mean(y, issue, lead, days=28) * inv  # the steadier level of a flat grid
        mean14 = same_hour_mean(y, issue, lead, days=14) * inv
        median7 = same_hour_median(y, issue, lead) * inv  # a level one odd day does not move
        anomaly_now = (_at(y, issue - 1) - now_mean7) * inv
        skill = {name: w.mean(issue - SKILL_WINDOW, issue) * inv for name, w in self._skill.items()}
        # the trees predict in units of the grid's volatility: the same anomalies in those units
        unit = np.maximum(
            np.where(np.isfinite(skill["mean7"]), skill["mean7"], 0.1), MIN_VOLATILITY
        )
        anomaly_3h = np.mean(
            [
                (_at(y, issue - k) - same_hour_mean(y, issue - 23 - k, np.full_like(issue, 24)))
                * inv
                for k in (1, 2, 3)
            ],
            axis=0,
        )

        clear = _at(self.clear_sky, target)
        wind_cf = capacity_factor(hub_height_speed(weather.wind_ms))
        ghi = weather.ghi_wm2 / 1000.0
        with np.errstate(invalid="ignore", divide="ignore"):
            clearness = np.where(clear > NIGHT_WM2 / 1000.0, ghi / clear, np.nan)
        d_wind = wind_cf - _at(self.wind_cf, naive24_pos)
        d_ghi = ghi - _at(self.ghi, naive24_pos)
        columns = {
            "lead_h": lead.astype(float),
            "solar_hour": _at(self.solar_hour, target),
            "local_weekday": _at(self.weekday.astype(float), target),
            "weekend": (_at(self.weekday.astype(float), target) >= 5).astype(float),
            "season": _at(self.season, target),
            "abs_latitude": np.full(len(issue), abs(self.series.latitude)),
            "clear_sky_kwm2": clear,
            "last": _at(y, issue - 1) * inv,
            "last3": self._y.mean(issue - 3, issue) * inv,
            "mean24": mean24 * inv,
            "trend_week": (mean24 - self._y.mean(issue - WEEK, issue - WEEK + 24)) * inv,
            "std_week": std * inv,
            "min_week": _at(self._min, issue - 1) * inv,
            "max_week": _at(self._max, issue - 1) * inv,
            "anomaly_now": anomaly_now,
            "naive24": naive24,
            "naive48": _at(y, naive24_pos - 24) * inv,
            "naive168": seasonal_naive_168h(y, issue, lead) * inv,
            "mean7": mean7,
            "temperature_c": weather.temperature_c,
            "wind_cf": wind_cf,
            "ghi_kwm2": ghi,
            "clearness": clearness,
            "d_wind_cf": d_wind,
            "d_ghi_kwm2": d_ghi,
            "d_temperature_c": weather.temperature_c - _at(self.temperature, naive24_pos),
            "wind_cf_vs_week": wind_cf - self._wind.mean(issue - WEEK, issue),
            "temperature_vs_week": weather.temperature_c
            - self._temperature.mean(issue - WEEK, issue),
            "beta_wind": beta_w * inv,
            "beta_sun": beta_g * inv,
            "wind_effect": beta_w * inv * d_wind,
            "sun_effect": beta_g * inv * d_ghi,
            "naive24_vs_mean7": naive24 - mean7,
            "day_change_now": (_at(y, issue - 1) - _at(y, issue - 25)) * inv,
            "anomaly_decayed": anomaly_now * np.exp(-(lead - 1) / 12.0),
            "skill_naive24": skill["naive24"],
            "skill_naive168": skill["naive168"],
            "skill_mean7": skill["mean7"],
            "skill_hourly": skill["hourly"],
            "anomaly_3h": anomaly_3h,
            "anomaly_24h": (mean24 - self._y.mean(issue - WEEK - 24, issue - 24)) * inv,
            "slope_1h": (_at(y, issue - 1) - _at(y, issue - 2)) * inv,
            "slope_3h": (_at(y, issue - 1) - _at(y, issue - 4)) * inv,
            "anomaly_now_z": anomaly_now / unit,
            "anomaly_3h_z": anomaly_3h / unit,
            "anomaly_decayed_z": anomaly_now * np.exp(-(lead - 1) / 12.0) / unit,
            "naive24_vs_mean7_z": (naive24 - mean7) / unit,
            "naive168_vs_mean7_z": (seasonal_naive_168h(y, issue, lead) * inv - mean7) / unit,
            "sun_wind_effect_z": (beta_w * inv * d_wind + beta_g * inv * d_ghi) / unit,
            "mean28_vs_mean7": mean28 - mean7,
            "mean28_vs_mean7_z": (mean28 - mean7) / unit,
            "mean14_vs_mean7": mean14 - mean7,
            "mean14_vs_mean7_z": (mean14 - mean7) / unit,
            "median7_vs_mean7": median7 - mean7,
            "median7_vs_mean7_z": (median7 - mean7) / unit,
        }
        return pd.DataFrame(columns)[FEATURE_NAMES]

    def scale(self, issue: np.ndarray) -> np.ndarray:
        """Mean intensity of the week before each issue: the unit the model predicts in."""
        return self._y.mean(np.asarray(issue) - WEEK, np.asarray(issue))
