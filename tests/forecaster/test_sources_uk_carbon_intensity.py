"""The GB Carbon Intensity API through MockTransport, answering half-hours of real GB intensity
around the October 2020 clock change (fixtures/providers/uk_carbon_intensity_GB.json)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pandas as pd
import pytest

from metatune_forecaster.adapters.uk_carbon_intensity import UkCarbonIntensitySource
from metatune_forecaster.domain.providers import Signal, SourceMisconfigured

from .provider_api import FakeClock, ProviderApi, between, fixture, hourly, http

HALF_HOURS: list[dict[str, Any]] = fixture("uk_carbon_intensity_GB")["records"]
START, END = datetime(2020, 10, 24, tzinfo=UTC), datetime(2020, 10, 27, tzinfo=UTC)


def answer(half_hours: list[dict[str, Any]]) -> Any:
    def respond(request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        regional = parts[0] == "regional"
        frm, to = parts[2:4] if regional else parts[1:3]
        if to == "fw48h":
            to = str(pd.Timestamp(frm) + pd.Timedelta(hours=48))
        # like the API, answer the half-hours that touch the range at either end as well
        edge = pd.Timedelta(minutes=30)
        rows = between(
            half_hours, "from", str(pd.Timestamp(frm) - edge), str(pd.Timestamp(to) + edge)
        )
        if not regional:
            return httpx.Response(200, json={"data": rows})
        assert parts[4:] == ["regionid", "13"]
        regional_rows = [
            {
                "from": r["from"],
                "to": r["to"],
                "intensity": {"forecast": r["intensity"]["actual"], "index": "low"},
                "generationmix": [{"fuel": "wind", "perc": 30.0}],
            }
            for r in rows
        ]
        block = {"regionid": 13, "dnoregion": "UKPN London", "shortname": "London"}
        return httpx.Response(200, json={"data": {**block, "data": regional_rows}})

    return respond


def source(
    half_hours: list[dict[str, Any]] = HALF_HOURS, **options: Any
) -> tuple[UkCarbonIntensitySource, ProviderApi]:
    api = ProviderApi(answer(half_hours))
    return UkCarbonIntensitySource(http(api, FakeClock()), **options), api


def actual(row: dict[str, Any]) -> float:
    return float(row["intensity"]["actual"])


@pytest.mark.asyncio
@pytest.mark.parametrize("zone", ["national", "13"])
async def test_half_hours_become_utc_hours_across_the_clock_change(zone: str) -> None:
    uk, api = source()
    observed = await uk.observed(zone, START, END)
    assert uk.signal is Signal.average
    # 72 UTC hours although 25 October 2020 had 25 local hours (50 settlement periods)
    assert len(observed) == 72 and str(observed.index.tz) == "UTC"
    assert (observed.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    pd.testing.assert_series_equal(
        observed, hourly(HALF_HOURS, "from", actual), check_names=False, check_freq=False
    )
    path = api.requests[0].url.path
    assert path.startswith("/regional/intensity/" if zone == "13" else "/intensity/")
    assert "/2020-10-24T00:00Z/2020-10-27T00:00Z" in path


@pytest.mark.asyncio
async def test_the_national_series_uses_actual_and_a_missing_actual_leaves_its_half_out() -> None:
    rows = [dict(r, intensity=dict(r["intensity"])) for r in HALF_HOURS]
    rows[1]["intensity"]["actual"] = None  # 00:30-01:00 not yet estimated
    del rows[4:6]  # 02:00-03:00 missing altogether
    uk, _ = source(rows)
    observed = await uk.observed("national", START, END)
    assert observed.iloc[0] == actual(HALF_HOURS[0])  # the hour of the one half that is there
    assert pd.Timestamp("2020-10-24T02:00Z") not in observed.index and len(observed) == 71


@pytest.mark.asyncio
async def test_windows_longer_than_the_api_allows_are_paged() -> None:
    uk, api = source(page_days=1)
    observed = await uk.observed("national", START, END)  # no half-hour counted twice
    pd.testing.assert_series_equal(
        observed, hourly(HALF_HOURS, "from", actual), check_names=False, check_freq=False
    )
    assert [r.url.path for r in api.requests] == [
        "/intensity/2020-10-24T00:00Z/2020-10-25T00:00Z",
        "/intensity/2020-10-25T00:00Z/2020-10-26T00:00Z",
        "/intensity/2020-10-26T00:00Z/2020-10-27T00:00Z",
    ]


@pytest.mark.asyncio
async def test_its_48_hour_forecast() -> None:
    uk, api = source()
    issue = datetime(2020, 10, 25, 6, tzinfo=UTC)
    forecast = await uk.forecast("national", issue, 168)
    assert api.requests[0].url.path == "/intensity/2020-10-25T06:00Z/fw48h"
    assert forecast is not None and len(forecast) == 42 and forecast.index[0] == issue
    expected = hourly(HALF_HOURS, "from", lambda r: r["intensity"]["forecast"])
    pd.testing.assert_series_equal(forecast, expected[issue:], check_names=False, check_freq=False)


@pytest.mark.asyncio
async def test_a_zone_it_does_not_have_is_a_configuration_error() -> None:
    uk, api = source()
    with pytest.raises(SourceMisconfigured, match="intensity_zone"):
        await uk.observed("GB-London", START, END)
    assert api.requests == []


@pytest.mark.asyncio
async def test_its_forecast_is_behind_a_setting() -> None:
    uk, api = source(forecast=False)
    assert await uk.forecast("national", datetime(2020, 10, 25, 6, tzinfo=UTC), 168) is None
    assert api.requests == []  # /fw48h is not even asked
