"""WattTime (API v3) through MockTransport: login for a bearer token, renewed before its 30
minutes run out; 5-minute MOER points in lbs/MWh (fixtures/providers/watttime_CAISO_NORTH.json:
real CAISO hours spread over 5-minute points) become hourly gCO2/kWh, labelled marginal."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import httpx
import pandas as pd
import pytest
from pydantic import SecretStr

from metatune_forecaster.adapters.watttime import WattTimeSource
from metatune_forecaster.domain.providers import ProviderUnavailable, Signal, SourceMisconfigured

from .provider_api import Failure, FakeClock, ProviderApi, between, fixture, hourly, http

DATA = fixture("watttime_CAISO_NORTH")
POINTS: list[dict[str, Any]] = DATA["records"]
USER, PASSWORD = "metatune", "wt-password-9d41"
START, END = datetime(2023, 3, 11, tzinfo=UTC), datetime(2023, 3, 13, tzinfo=UTC)


class WattTimeApi:
    """Issues tokens at /login (basic auth), serves data to a bearer of a valid one."""

    def __init__(self, units: str = "lbs_co2_per_mwh") -> None:
        self.units = units
        self.issued: list[str] = []
        self.valid: set[str] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/login":
            basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            if request.headers.get("authorization") != f"Basic {basic}":
                return httpx.Response(403, json={"error": "bad credentials"})
            token = f"wt-bearer-{len(self.issued)}"
            self.issued.append(token)
            self.valid.add(token)
            return httpx.Response(200, json={"token": token})
        if request.headers.get("authorization", "").removeprefix("Bearer ") not in self.valid:
            return httpx.Response(401, json={"error": "token expired"})
        params = request.url.params
        assert params["signal_type"] == "co2_moer" and params["region"] == "CAISO_NORTH"
        if request.url.path == "/v3/historical":
            end = pd.Timestamp(params["end"]) + pd.Timedelta(minutes=5)  # the end point too
            data = between(POINTS, "point_time", params["start"], str(end))
        else:  # /v3/forecast: the next horizon_hours from the issue the test uses
            data = between(POINTS, "point_time", "2023-03-12T12:00Z", "2023-03-13T00:00Z")
            data = data[: 12 * int(params["horizon_hours"])]
        return httpx.Response(
            200, json={"data": data, "meta": {**DATA["meta"], "units": self.units}}
        )


def source(
    failures: list[Failure] | None = None, api: WattTimeApi | None = None, **options: Any
) -> tuple[WattTimeSource, ProviderApi, FakeClock, WattTimeApi]:
    server = api or WattTimeApi()
    scripted, clock = ProviderApi(server, failures), FakeClock()
    http_client = http(
        scripted, clock, "METATUNE_WATTTIME_USERNAME / METATUNE_WATTTIME_PASSWORD_FILE"
    )
    wt = WattTimeSource(USER, SecretStr(PASSWORD), http_client, clock=clock, **options)
    return wt, scripted, clock, server


def expected_g_per_kwh(points: list[dict[str, Any]]) -> pd.Series:
    return hourly(points, "point_time", lambda p: p["value"] * 0.453592)


@pytest.mark.asyncio
async def test_moer_points_become_hourly_g_per_kwh_and_the_signal_says_marginal() -> None:
    wt, api, _, _ = source(page_days=1)
    observed = await wt.observed("CAISO_NORTH", START, END)
    assert wt.signal is Signal.marginal
    # 48 UTC hours across the US clock change of 12 March, each the mean of twelve points
    assert len(observed) == 48 and str(observed.index.tz) == "UTC"
    pd.testing.assert_series_equal(
        observed, expected_g_per_kwh(POINTS), check_names=False, check_freq=False
    )
    # 1 lb/MWh = 0.453592 g/kWh: the source hour was 0.453592 * mean(lbs) g/kWh
    first_hour = [p["value"] for p in POINTS[:12]]
    assert observed.iloc[0] == pytest.approx(sum(first_hour) / 12 * 0.453592)
    assert api.paths() == ["/login", "/v3/historical", "/v3/historical"]  # one page a day


@pytest.mark.asyncio
async def test_the_token_is_renewed_before_its_30_minutes_run_out() -> None:
    wt, api, clock, server = source()
    await wt.observed("CAISO_NORTH", START, END)
    clock.now += 20 * 60  # 20 min: still good
    await wt.observed("CAISO_NORTH", START, END)
    assert wt.logins == 1
    clock.now += 6 * 60  # 26 min: within the 5 min margin, renewed before any refusal
    await wt.observed("CAISO_NORTH", START, END)
    assert wt.logins == 2 and api.paths().count("/login") == 2
    server.valid.clear()  # revoked early anyway: one more login, then the data
    assert len(await wt.observed("CAISO_NORTH", START, END)) == 48 and wt.logins == 3


@pytest.mark.asyncio
async def test_its_forecast_is_hourly_from_the_issue() -> None:
    wt, api, _, _ = source()
    issue = datetime(2023, 3, 12, 12, tzinfo=UTC)
    forecast = await wt.forecast("CAISO_NORTH", issue, 6)
    assert forecast is not None and len(forecast) == 6 and forecast.index[0] == issue
    assert api.requests[-1].url.params["horizon_hours"] == "6"
    pd.testing.assert_series_equal(
        forecast,
        expected_g_per_kwh(between(POINTS, "point_time", "2023-03-12T12:00Z", "2023-03-12T18:00Z")),
        check_names=False,
        check_freq=False,
    )


@pytest.mark.asyncio
async def test_unexpected_units_are_refused_not_converted_wrongly() -> None:
    wt, _, _, _ = source(api=WattTimeApi(units="g_co2_per_kwh"))
    with pytest.raises(ProviderUnavailable, match="units 'g_co2_per_kwh'"):
        await wt.observed("CAISO_NORTH", START, END)


@pytest.mark.asyncio
async def test_a_refused_login_names_the_settings_and_never_the_password() -> None:
    wt = WattTimeSource(USER, SecretStr("wrong-password"), source()[0].http, clock=FakeClock())
    with pytest.raises(SourceMisconfigured) as caught:
        await wt.observed("CAISO_NORTH", START, END)
    message = str(caught.value)
    assert "METATUNE_WATTTIME_PASSWORD_FILE" in message and "HTTP 403" in message
    assert "wrong-password" not in message + repr(wt) and PASSWORD not in message


@pytest.mark.asyncio
async def test_busy_and_failing_answers_are_retried() -> None:
    wt, api, clock, _ = source([(429, {"Retry-After": "3"}), 500])
    assert len(await wt.observed("CAISO_NORTH", START, END)) == 48
    assert clock.sleeps == [3.0, 2.0] and api.paths()[:3] == ["/login"] * 3
