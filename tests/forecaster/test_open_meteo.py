"""The Open-Meteo adapter against an HTTP transport that answers like the real API (or fails)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import numpy as np
import pandas as pd
import pytest

from metatune_forecaster.adapters.open_meteo import OpenMeteoWeather
from metatune_forecaster.domain.providers import ProviderUnavailable, Site

from .provider_api import ProviderApi

ISSUE = datetime(2025, 3, 14, 6, tzinfo=UTC)
SITE = Site("DE", 50.11, 8.68)


def payload(params: httpx.QueryParams) -> dict:
    """An Open-Meteo answer for the asked days: local times in the asked zone, nulls where missing."""
    past, days = int(params["past_days"]), int(params["past_days"]) + int(params["forecast_days"])
    times = pd.date_range(
        pd.Timestamp(ISSUE.date()) - pd.Timedelta(days=past), periods=24 * days, freq="h"
    )
    temperature = [round(5 + 5 * np.sin(i / 24 * 2 * np.pi), 1) for i in range(len(times))]
    temperature[30] = None
    return {
        "latitude": float(params["latitude"]),
        "longitude": float(params["longitude"]),
        "utc_offset_seconds": 0,
        "hourly_units": {"temperature_2m": "°C", "wind_speed_10m": "m/s", "cloud_cover": "%"},
        "hourly": {
            "time": [t.strftime("%Y-%m-%dT%H:%M") for t in times],
            "temperature_2m": temperature,
            "wind_speed_10m": [7.5] * len(times),
            "cloud_cover": [40] * len(times),
        },
    }


def answer(request: httpx.Request) -> httpx.Response:
    """Real-shaped data for what ``request`` asks (after the stand-in's scripted failures)."""
    return httpx.Response(200, text=json.dumps(payload(request.url.params)))


def provider(api: ProviderApi, retries: int = 3) -> OpenMeteoWeather:
    return OpenMeteoWeather(retries=retries, backoff_s=0.0, transport=httpx.MockTransport(api))


@pytest.mark.asyncio
async def test_hourly_weather_covers_history_and_horizon_in_our_units() -> None:
    api = ProviderApi(answer)
    frame = await provider(api).hourly(SITE, ISSUE, 672, 168)
    assert len(frame) == 840 and frame.index[0] == pd.Timestamp(ISSUE) - pd.Timedelta(hours=672)
    assert frame.index[672] == pd.Timestamp(ISSUE) and str(frame.index.tz) == "UTC"
    assert set(frame.columns) == {"temperature_c", "wind_ms", "cloud_pct"}
    assert (
        frame["wind_ms"].eq(7.5).all() and frame["temperature_c"].isna().sum() == 1
    )  # null -> NaN
    params = api.requests[0].url.params
    assert (
        params["wind_speed_unit"] == "ms"
        and int(params["past_days"]) >= 28
        and int(params["forecast_days"]) >= 7
    )


@pytest.mark.asyncio
async def test_transient_failures_are_retried_and_answers_cached() -> None:
    api = ProviderApi(answer, [503, httpx.ConnectTimeout("slow"), 429])
    weather = provider(api)
    first = await weather.hourly(SITE, ISSUE, 672, 168)
    again = await weather.hourly(SITE, ISSUE, 672, 168)
    assert len(api.requests) == 4  # three failures, one answer, then the cache
    pd.testing.assert_frame_equal(first, again)


@pytest.mark.asyncio
async def test_provider_down_or_refusing_raises_provider_unavailable() -> None:
    with pytest.raises(ProviderUnavailable, match="after 3 attempts"):
        await provider(ProviderApi(answer, [503, 503, 503]), retries=2).hourly(SITE, ISSUE, 24, 24)
    with pytest.raises(ProviderUnavailable, match="HTTP 400"):
        await provider(ProviderApi(answer, [400])).hourly(SITE, ISSUE, 24, 24)
    unreachable = OpenMeteoWeather(url="http://127.0.0.1:9/v1/forecast", retries=0, timeout_s=2.0)
    with pytest.raises(ProviderUnavailable):
        await unreachable.hourly(SITE, ISSUE, 24, 24)
