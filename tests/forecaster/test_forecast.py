"""Forecasts from the committed model on the replay extract: shape, bands, imputation, stale shift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from metatune.contracts import CarbonForecast
from metatune.registry import default_registry
from metatune_forecaster.adapters.model_files import load_weather_error
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.adapters.replay import ReplayData, ReplayIntensity, ReplayWeather
from metatune_forecaster.domain.features import HISTORY_HOURS
from metatune_forecaster.domain.forecast import (
    InsufficientHistory,
    impute_weather,
    make_forecast,
    shift_stale,
)
from metatune_forecaster.domain.model import CarbonModel
from metatune_forecaster.domain.providers import Site

ISSUE = datetime(2025, 3, 14, 6, tzinfo=UTC)
NOW = ISSUE + timedelta(minutes=3)


def site(region: str) -> Site:
    dc = next(dc for dc in default_registry().datacenters if dc.region == region)
    return Site(region, dc.latitude, dc.longitude)


async def inputs(replay: ReplayData, region: str) -> tuple[pd.Series, pd.DataFrame]:
    weather = ReplayWeather(replay, load_weather_error(WEATHER_ERROR_PATH))
    return (
        await ReplayIntensity(replay).history(region, ISSUE, HISTORY_HOURS),
        await weather.hourly(site(region), ISSUE, HISTORY_HOURS, 168),
    )


def forecast(
    model: CarbonModel, region: str, intensity: pd.Series, weather: pd.DataFrame
) -> CarbonForecast:
    s = site(region)
    return make_forecast(model, region, s.latitude, s.longitude, ISSUE, intensity, weather, NOW)


@pytest.mark.asyncio
@pytest.mark.parametrize("region", ["DE", "US-CAL-CISO", "NO"])
async def test_forecast_has_168_hourly_values_with_bands_around_the_median(
    model: CarbonModel, replay: ReplayData, region: str
) -> None:
    intensity, weather = await inputs(replay, region)
    result = forecast(model, region, intensity, weather)
    assert result.start == ISSUE and result.issued_at == ISSUE and not result.stale
    assert len(result.g_per_kwh) == len(result.p10_g_per_kwh) == len(result.p90_g_per_kwh) == 168
    low, mid, high = (
        np.array(v) for v in (result.p10_g_per_kwh, result.g_per_kwh, result.p90_g_per_kwh)
    )
    assert np.all(low <= mid) and np.all(mid <= high) and np.all(low >= 0)
    assert np.mean(high - low) > 0  # a real interval, not a point
    # the forecast lives on the scale of the region's own recent intensity
    assert 0.3 * intensity.tail(168).mean() < mid.mean() < 3 * intensity.tail(168).mean()
    if region == "NO":  # no weather in the extract for NO: every hour runs without it, and says so
        assert result.imputed_hours == list(range(168))
    else:
        assert result.imputed_hours == []


@pytest.mark.asyncio
async def test_weather_gaps_are_imputed_and_flagged(model: CarbonModel, replay: ReplayData) -> None:
    intensity, weather = await inputs(replay, "DE")
    holed = weather.copy()
    holed.iloc[HISTORY_HOURS + 10 : HISTORY_HOURS + 13, holed.columns.get_loc("wind_ms")] = np.nan
    holed.iloc[HISTORY_HOURS + 50 : HISTORY_HOURS + 90, holed.columns.get_loc("cloud_pct")] = np.nan
    result = forecast(model, "DE", intensity, holed)
    assert result.imputed_hours == [10, 11, 12, *range(50, 90)]
    filled, missing = impute_weather(holed)
    assert not filled.isna().any().any() and missing.sum() == 43
    # a long gap takes the same hour of the day before, not a flat line
    cloud = filled["cloud_pct"].to_numpy()
    assert np.array_equal(
        cloud[HISTORY_HOURS + 50 : HISTORY_HOURS + 74],
        cloud[HISTORY_HOURS + 26 : HISTORY_HOURS + 50],
    )


@pytest.mark.asyncio
async def test_without_recent_intensity_there_is_no_forecast(
    model: CarbonModel, replay: ReplayData
) -> None:
    intensity, weather = await inputs(replay, "DE")
    intensity.iloc[-168:] = np.nan
    with pytest.raises(InsufficientHistory):
        forecast(model, "DE", intensity, weather)


@pytest.mark.asyncio
async def test_stale_forecast_is_the_last_one_shifted_by_the_elapsed_hours(
    model: CarbonModel, replay: ReplayData
) -> None:
    intensity, weather = await inputs(replay, "GB")
    last = forecast(model, "GB", intensity, weather)
    later = ISSUE + timedelta(hours=5)
    stale = shift_stale(last, later, later)
    assert stale.stale and stale.start == later and stale.issued_at == last.issued_at
    assert stale.event_id != last.event_id
    assert stale.g_per_kwh[:163] == last.g_per_kwh[5:]
    assert (
        stale.g_per_kwh[163:] == last.g_per_kwh[163 - 19 : 168 - 19]
    )  # same hours, one day earlier
    assert len(stale.p10_g_per_kwh) == 168 and stale.p90_g_per_kwh[:163] == last.p90_g_per_kwh[5:]
    with pytest.raises(ValueError):
        shift_stale(last, ISSUE - timedelta(hours=1), NOW)
