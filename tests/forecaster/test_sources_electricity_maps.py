"""Electricity Maps (API v3) through MockTransport, answering from 4 real days of DE in the
documented record format (fixtures/providers/electricity_maps_DE.json): the direct or the
life-cycle intensity, as the request's ``emissionFactorType`` asks (the API's default: life-cycle)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pandas as pd
import pytest
from pydantic import SecretStr

from metatune_forecaster.adapters.electricity_maps import ElectricityMapsSource
from metatune_forecaster.domain.providers import (
    EmissionFactors,
    ProviderUnavailable,
    Signal,
    SourceMisconfigured,
)

from .provider_api import Failure, FakeClock, ProviderApi, between, fixture, hourly, http

DATA = fixture("electricity_maps_DE")
RECORDS: list[dict[str, Any]] = DATA["records"]
LIFECYCLE: list[dict[str, Any]] = [
    {**record, "carbonIntensity": value, "emissionFactorType": "lifecycle"}
    for record, value in zip(RECORDS, DATA["lifecycle"], strict=True)
]
TOKEN = "em-token-5f1c2e"
START, END = datetime(2023, 3, 24, tzinfo=UTC), datetime(2023, 3, 28, tzinfo=UTC)


def answer(records: list[dict[str, Any]], ignores_factors: bool = False) -> Any:
    """The API on ``records`` (direct); a request for life-cycle factors, or any request when it
    ``ignores_factors`` (as if the parameter were dropped on the way), gets life-cycle records."""

    def respond(request: httpx.Request) -> httpx.Response:
        assert request.headers["auth-token"] == TOKEN
        params, path = request.url.params, request.url.path
        if ignores_factors or params.get("emissionFactorType", "lifecycle") == "lifecycle":
            by_hour = {r["datetime"]: r for r in LIFECYCLE}
            records_ = [by_hour.get(r["datetime"], r) for r in records]
        else:
            records_ = records
        return _respond(records_, params, path)

    return respond


def _respond(records: list[dict[str, Any]], params: Any, path: str) -> httpx.Response:
    if path.endswith("/past-range"):
        end = str(pd.Timestamp(params["end"]) + pd.Timedelta(hours=1))  # end hour included
        body = {"zone": "DE", "data": between(records, "datetime", params["start"], end)}
    elif path.endswith("/history"):
        body = {"zone": "DE", "history": records[-24:]}
    elif path.endswith("/forecast"):  # the factors said once, for the whole forecast
        body = {
            "zone": "DE",
            "forecast": [
                {"carbonIntensity": r["carbonIntensity"], "datetime": r["datetime"]}
                for r in records[-24:]
            ],
            "updatedAt": "2023-03-27T00:05:00.000Z",
            "emissionFactorType": records[-1]["emissionFactorType"],
        }
    else:
        body = records[-1]
    return httpx.Response(200, json=body)


def source(
    failures: list[Failure] | None = None,
    records: list[dict[str, Any]] = RECORDS,
    ignores_factors: bool = False,
    **options: Any,
) -> tuple[ElectricityMapsSource, ProviderApi, FakeClock]:
    api, clock = ProviderApi(answer(records, ignores_factors), failures), FakeClock()
    em = ElectricityMapsSource(
        SecretStr(TOKEN), http(api, clock, "METATUNE_ELECTRICITYMAPS_TOKEN_FILE"), **options
    )
    return em, api, clock


def expected(records: list[dict[str, Any]] = RECORDS) -> pd.Series:
    return hourly(records, "datetime", lambda r: r["carbonIntensity"])


@pytest.mark.asyncio
async def test_a_long_window_is_paged_through_past_range_and_is_the_real_trace_hour_by_hour() -> (
    None
):
    em, api, _ = source(page_hours=48)
    observed = await em.observed("DE", START, END)
    assert em.signal is Signal.average and str(observed.index.tz) == "UTC"
    # 96 hours across the EU clock change of 26 March: contiguous in UTC, one value each
    assert len(observed) == 96 and observed.index.is_monotonic_increasing
    assert (observed.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    pd.testing.assert_series_equal(observed, expected(), check_names=False, check_freq=False)
    pages = [(r.url.params["start"], r.url.params["end"]) for r in api.requests]
    assert pages == [
        ("2023-03-24T00:00:00Z", "2023-03-26T00:00:00Z"),
        ("2023-03-26T00:00:00Z", "2023-03-28T00:00:00Z"),
    ]
    em_default, api_default, _ = source()
    await em_default.observed("DE", START, END)  # 96 h fit the documented 240 h page
    assert len(api_default.requests) == 1


@pytest.mark.asyncio
async def test_the_last_24_hours_come_from_history_which_every_plan_has() -> None:
    em, api, _ = source(now=lambda: END)
    observed = await em.observed("DE", datetime(2023, 3, 27, tzinfo=UTC), END)
    assert api.paths() == ["/v3/carbon-intensity/history"] and len(observed) == 24
    pd.testing.assert_series_equal(
        observed, expected(RECORDS[-24:]), check_names=False, check_freq=False
    )
    latest = await em.latest("DE")
    assert latest.index[0] == pd.Timestamp("2023-03-27T23:00Z")


@pytest.mark.asyncio
async def test_gaps_stay_absent_and_a_duplicate_hour_is_averaged() -> None:
    records = [r for r in RECORDS if r["datetime"] != "2023-03-25T05:00:00.000Z"]
    records[10] = {**records[10], "carbonIntensity": None}  # a null is a gap, not a zero
    twin = {**records[20], "carbonIntensity": records[20]["carbonIntensity"] + 100}
    records.insert(21, twin)
    em, _, _ = source(records=records)
    observed = await em.observed("DE", START, END)
    assert len(observed) == 94 and observed.index.is_unique
    assert pd.Timestamp("2023-03-25T05:00Z") not in observed.index
    assert pd.Timestamp(records[10]["datetime"]) not in observed.index
    assert observed[pd.Timestamp(twin["datetime"])] == pytest.approx(
        RECORDS[20]["carbonIntensity"] + 50
    )


@pytest.mark.asyncio
async def test_its_own_forecast_only_where_the_plan_has_it() -> None:
    em, api, _ = source()
    issue = datetime(2023, 3, 27, tzinfo=UTC)
    assert await em.forecast("DE", issue, 168) is None and api.requests == []
    em, api, _ = source(forecast=True)
    forecast = await em.forecast("DE", issue, 12)
    assert forecast is not None and len(forecast) == 12 and forecast.index[0] == issue
    pd.testing.assert_series_equal(
        forecast, expected(RECORDS[-24:-12]), check_names=False, check_freq=False
    )


@pytest.mark.asyncio
async def test_429_waits_as_long_as_retry_after_asks_and_5xx_backs_off() -> None:
    em, api, clock = source([(429, {"Retry-After": "7"}), 503, 502, httpx.ConnectError("reset")])
    observed = await em.observed("DE", START, END)
    assert len(observed) == 96 and len(api.requests) == 5
    assert clock.sleeps == [7.0, 2.0, 4.0, 8.0]  # Retry-After honoured, then doubling backoff


@pytest.mark.asyncio
async def test_a_provider_down_for_good_is_unavailable_once_the_budget_is_spent() -> None:
    em, api, clock = source([503] * 100)
    with pytest.raises(ProviderUnavailable, match=r"did not answer .* for 60 s"):
        await em.observed("DE", START, END)
    assert sum(clock.sleeps) == pytest.approx(60.0) and len(api.requests) == 7  # 1+2+4+8+16+29


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [401, 403])
async def test_refused_credentials_name_the_setting_and_never_the_token(status: int) -> None:
    em, api, clock = source([status])
    with pytest.raises(SourceMisconfigured) as caught:
        await em.observed("DE", START, END)
    message = str(caught.value)
    assert "METATUNE_ELECTRICITYMAPS_TOKEN_FILE" in message and f"HTTP {status}" in message
    assert "plan includes /past-range" in message  # a valid token on a plan without it
    assert TOKEN not in message and TOKEN not in repr(em) and "\n" not in message
    assert len(api.requests) == 1 and clock.sleeps == []  # not retried


@pytest.mark.asyncio
async def test_it_asks_for_the_deployments_factors_and_gets_them() -> None:
    direct, api, _ = source()
    assert direct.factors is EmissionFactors.direct
    assert (await direct.observed("DE", START, END)).equals(expected())
    assert {r.url.params["emissionFactorType"] for r in api.requests} == {"direct"}
    lifecycle, api, _ = source(factors=EmissionFactors.lifecycle)
    observed = await lifecycle.observed("DE", START, END)
    assert {r.url.params["emissionFactorType"] for r in api.requests} == {"lifecycle"}
    pd.testing.assert_series_equal(
        observed, expected(LIFECYCLE), check_names=False, check_freq=False
    )
    assert (observed > expected()).all()  # life-cycle counts more than combustion, every hour


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["past-range", "history", "forecast", "latest"])
async def test_a_response_of_other_factors_than_asked_is_refused(path: str) -> None:
    em, api, clock = source(ignores_factors=True, forecast=True, now=lambda: END)
    calls = {
        "past-range": lambda: em.observed("DE", START, END),
        "history": lambda: em.observed("DE", datetime(2023, 3, 27, tzinfo=UTC), END),
        "forecast": lambda: em.forecast("DE", datetime(2023, 3, 27, tzinfo=UTC), 12),
        "latest": lambda: em.latest("DE"),
    }
    with pytest.raises(SourceMisconfigured) as caught:
        await calls[path]()
    message = str(caught.value)
    assert "'lifecycle'" in message and "METATUNE_EMISSION_FACTORS=direct" in message
    assert f"/v3/carbon-intensity/{path}" in message and "\n" not in message
    assert len(api.requests) == 1 and clock.sleeps == []  # refused, not retried
