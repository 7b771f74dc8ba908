"""The Carbon Aware SDK WebAPI through MockTransport, answering EmissionsData built from 3 real
days of DE around the October 2023 clock change (fixtures/providers/carbon_aware_sdk_DE.json)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pandas as pd
import pytest

from metatune_forecaster.adapters.carbon_aware_sdk import CarbonAwareSdkSource
from metatune_forecaster.domain.providers import ProviderUnavailable, Signal

from .provider_api import Failure, FakeClock, ProviderApi, between, fixture, hourly, http

ROWS: list[dict[str, Any]] = fixture("carbon_aware_sdk_DE")["records"]
ZONE = "germanywestcentral"
START, END = datetime(2023, 10, 27, tzinfo=UTC), datetime(2023, 10, 30, tzinfo=UTC)


def answer(rows: list[dict[str, Any]], forecast_status: int = 200) -> Any:
    def respond(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        assert params["location"] == ZONE
        if request.url.path == "/emissions/bylocation":
            return httpx.Response(200, json=between(rows, "time", params["time"], params["toTime"]))
        if forecast_status != 200:
            return httpx.Response(forecast_status, json={"title": "no forecast data source"})
        points = [
            {"location": "DE", "timestamp": r["time"], "duration": 60, "value": r["rating"]}
            for r in between(rows, "time", params["dataStartAt"], params["dataEndAt"])
        ]
        forecast = {
            "generatedAt": params["dataStartAt"],
            "requestedAt": params["dataStartAt"],
            "location": ZONE,
            "dataStartAt": params["dataStartAt"],
            "dataEndAt": params["dataEndAt"],
            "windowSize": 60,
            "optimalDataPoints": points[:1],
            "forecastData": points,
        }
        return httpx.Response(200, json=[forecast])

    return respond


def source(
    rows: list[dict[str, Any]] = ROWS,
    failures: list[Failure] | None = None,
    forecast_status: int = 200,
    signal: Signal = Signal.average,
) -> tuple[CarbonAwareSdkSource, ProviderApi]:
    api = ProviderApi(answer(rows, forecast_status), failures)
    return CarbonAwareSdkSource(http(api, FakeClock()), signal), api


def rating(row: dict[str, Any]) -> float:
    return float(row["rating"])


@pytest.mark.asyncio
async def test_emissions_by_location_are_the_real_hours_across_the_clock_change() -> None:
    sdk, api = source()
    observed = await sdk.observed(ZONE, START, END)
    assert len(observed) == 72 and sdk.signal is Signal.average
    pd.testing.assert_series_equal(
        observed, hourly(ROWS, "time", rating), check_names=False, check_freq=False
    )
    params = api.requests[0].url.params
    assert (params["time"], params["toTime"]) == ("2023-10-27T00:00:00Z", "2023-10-30T00:00:00Z")


@pytest.mark.asyncio
async def test_five_minute_points_are_averaged_and_long_points_cover_their_hours() -> None:
    first = ROWS[0]["rating"]
    fine = [
        {
            "location": ZONE,
            "time": f"2023-10-27T00:{m:02d}:00+00:00",
            "rating": first + d,
            "duration": "00:05:00",
        }
        for m, d in zip(range(0, 60, 5), [-3, 3] * 6, strict=True)
    ]
    long = {**ROWS[1], "duration": "03:00:00"}  # 01:00-04:00 in one point
    sdk, _ = source([*fine, long, *ROWS[4:]])
    observed = await sdk.observed(ZONE, START, END)
    assert observed.iloc[0] == pytest.approx(first)
    assert list(observed.iloc[1:4]) == [long["rating"]] * 3 and len(observed) == 72


@pytest.mark.asyncio
async def test_its_current_forecast_and_none_without_a_forecast_source() -> None:
    sdk, api = source()
    issue = datetime(2023, 10, 29, tzinfo=UTC)
    forecast = await sdk.forecast(ZONE, issue, 24)
    assert api.requests[0].url.path == "/emissions/forecasts/current"
    assert forecast is not None and len(forecast) == 24 and forecast.index[0] == issue
    pd.testing.assert_series_equal(
        forecast, hourly(ROWS[48:], "time", rating), check_names=False, check_freq=False
    )
    for status in (404, 501):
        assert await source(forecast_status=status)[0].forecast(ZONE, issue, 24) is None


@pytest.mark.asyncio
async def test_an_answer_in_another_shape_is_unavailable_not_a_crash() -> None:
    other = [{"location": ZONE, "when": "2023-10-27T00:00:00Z", "co2": 300}]
    api = ProviderApi(lambda request: httpx.Response(200, json=other))
    sdk = CarbonAwareSdkSource(http(api, FakeClock()))
    with pytest.raises(ProviderUnavailable, match="time and rating"):
        await sdk.observed(ZONE, START, END)
