"""Turn a region's recent history and a weather forecast into a :class:`CarbonForecast`.

Also the stale path: when no fresh forecast can be made, the last good one is shifted by the
hours elapsed, its tail continued with the same hours of its last day, and marked stale.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import numpy as np
import pandas as pd

from metatune.contracts import CarbonForecast, ObservedHour, ObservedIntensity
from metatune.contracts.forecasts import HORIZON_HOURS
from metatune.errors import MetaTuneError

from .features import HISTORY_HOURS, ForecastWeather, RegionArrays
from .model import CarbonModel, base_of
from .recent import Recalibration, backtest, past_issues
from .series import RegionSeries, regularise, with_ghi

MAX_INTERPOLATED_GAP_H = 6  # longer weather gaps are filled from the same hour of earlier days
WEATHER_INPUTS = ("temperature_c", "wind_ms", "cloud_pct")


class InsufficientHistory(MetaTuneError):
    """Not enough observed intensity before the issue time to scale the forecast."""


def impute_weather(weather: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Fill NaN weather: short gaps linearly, longer ones from the same hour of the nearest earlier
    day (or later day, at the start). Returns the filled frame and a mask of the hours that had
    any missing input. Columns with no value at all stay NaN (the model has a branch for that)."""
    missing = weather[list(WEATHER_INPUTS)].isna().any(axis=1).to_numpy()
    filled = weather.copy()
    for column in WEATHER_INPUTS:
        values = filled[column]
        if values.notna().sum() == 0:
            continue
        short_gap = _gap_lengths(values.isna().to_numpy()) <= MAX_INTERPOLATED_GAP_H
        values = values.where(~short_gap, values.interpolate(limit_area="inside"))
        for step in (24, -24):
            for _ in range(len(values) // 24 + 1):
                if not values.isna().any():
                    break
                values = values.fillna(values.shift(step))
        filled[column] = values
    return filled, missing


def _gap_lengths(missing: np.ndarray) -> np.ndarray:
    """For each missing hour, the length of the run of missing hours it belongs to (0 elsewhere)."""
    lengths = np.zeros(len(missing), dtype=int)
    start = None
    for i, gap in enumerate([*missing, False]):
        if gap and start is None:
            start = i
        elif not gap and start is not None:
            lengths[start:i] = i - start
            start = None
    return lengths


def make_forecast(
    model: CarbonModel,
    region: str,
    latitude: float,
    longitude: float,
    issue: datetime,
    intensity: pd.Series,
    weather: pd.DataFrame,
    occurred_at: datetime,
) -> CarbonForecast:
    """The 168 h forecast issued at ``issue`` (an hour boundary).

    ``intensity`` is observed before ``issue``; ``weather`` covers the history and the 168 hours
    from ``issue`` (observed before, forecast from it on), with ``temperature_c``, ``wind_ms``
    and ``cloud_pct`` columns.
    """
    issue_ts = pd.Timestamp(issue).tz_convert("UTC")
    if issue_ts != issue_ts.floor("h"):
        raise ValueError(f"issue time {issue} is not on the hour")
    horizon = pd.date_range(issue_ts, periods=HORIZON_HOURS, freq="h")
    history_index = pd.date_range(
        issue_ts - pd.Timedelta(hours=HISTORY_HOURS), issue_ts, freq="h", inclusive="left"
    )
    observed = intensity[(intensity.index >= history_index[0]) & (intensity.index < issue_ts)]
    if observed.tail(168).notna().sum() < 24:
        raise InsufficientHistory(
            f"{region}: fewer than 24 observed hours in the week before {issue_ts}"
        )

    weather = weather.reindex(history_index.append(horizon))
    weather, missing = impute_weather(weather)
    frame = weather.join(observed.rename("ci"))
    frame = with_ghi(regularise(frame), latitude, longitude)
    arrays = RegionArrays(RegionSeries(region, region, latitude, longitude, frame))

    start = len(history_index)
    future = frame.iloc[start:]
    forecast_weather = ForecastWeather(
        future["temperature_c"].to_numpy(),
        future["wind_ms"].to_numpy(),
        future["ghi_wm2"].to_numpy(),
    )
    issues = np.full(HORIZON_HOURS, start, dtype=np.int64)
    leads = np.arange(1, HORIZON_HOURS + 1)
    features = arrays.features(issues, leads, forecast_weather)
    low, mid, high = model.predict(features)
    # re-forecast the last four weeks of this region, score them on the hours observed since, and
    # blend / rescale by what would have worked there (domain/recent.py)
    seed = int.from_bytes(
        hashlib.sha256(f"{region}|{issue_ts.isoformat()}".encode()).digest()[:8], "big"
    )
    past = backtest(
        model, arrays, past_issues(start), model.weather_error(), np.random.default_rng(seed)
    )
    low, mid, high = Recalibration.learn(past.scored_before(start)).apply(
        low, mid, high, base_of(features), leads
    )
    scale = float(arrays.scale(issues[:1])[0])
    return CarbonForecast(
        occurred_at=occurred_at,
        region=region,
        issued_at=issue_ts.to_pydatetime(),
        start=issue_ts.to_pydatetime(),
        model_version=model.version,
        stale=False,
        g_per_kwh=_rounded(mid * scale),
        p10_g_per_kwh=_rounded(low * scale),
        p90_g_per_kwh=_rounded(high * scale),
        imputed_hours=[int(h) for h in np.flatnonzero(missing[start:])],
    )


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 2) for v in values]


def shift_stale(last: CarbonForecast, hour: datetime, occurred_at: datetime) -> CarbonForecast:
    """``last`` moved on to start at ``hour``: the elapsed hours dropped, the same number added at
    the end by repeating the same hour of the day before, marked stale (its ``issued_at`` kept)."""
    elapsed = int((pd.Timestamp(hour) - pd.Timestamp(last.start)) // pd.Timedelta(hours=1))
    if elapsed < 0:
        raise ValueError(f"cannot shift a forecast starting {last.start} back to {hour}")

    def shifted(values: list[float]) -> list[float]:
        out = list(values)
        for _ in range(elapsed):
            out.append(out[-24])
        return out[elapsed : elapsed + HORIZON_HOURS]

    imputed = sorted({h - elapsed for h in last.imputed_hours if h >= elapsed})
    return CarbonForecast(
        **{
            **last.model_dump(exclude={"event_id"}),
            "occurred_at": occurred_at,
            "start": pd.Timestamp(hour).to_pydatetime(),
            "stale": True,
            "g_per_kwh": shifted(last.g_per_kwh),
            "p10_g_per_kwh": shifted(last.p10_g_per_kwh),
            "p90_g_per_kwh": shifted(last.p90_g_per_kwh),
            "imputed_hours": imputed,
        }
    )


OBSERVED_HOURS = 24  # the observed hours each forecast carries (telemetry re-prices job-hours)


def with_observed(
    forecast: CarbonForecast, history: pd.Series, source: str, signal: str = "average"
) -> CarbonForecast:
    """``forecast`` carrying the last ``OBSERVED_HOURS`` observed hours of ``history`` before its
    start (the hours the source lacks left out): realised intensity for accounting."""
    start = pd.Timestamp(forecast.start)
    recent = history[
        (history.index < start) & (history.index >= start - pd.Timedelta(hours=OBSERVED_HOURS))
    ]
    hours = [
        ObservedHour(hour=ts.to_pydatetime(), g_per_kwh=round(float(v), 2))
        for ts, v in recent.dropna().sort_index().items()
        if pd.Timestamp(ts) == pd.Timestamp(ts).floor("h") and v >= 0
    ]
    observed = ObservedIntensity(source=source, signal=signal, hours=hours)
    return forecast.model_copy(update={"observed": observed})
