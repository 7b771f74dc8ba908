"""The forecaster live end to end: 8 weeks of a provider's hourly history go through the
observation store into the same forecast the replay path makes on that history; only missing
hours are fetched; short histories, the provider's own forecast, marginal signals and an outage
are each visible in what is published."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import nats
import numpy as np
import pandas as pd
import pytest
from pydantic import SecretStr

from metatune import subjects
from metatune.contracts import CarbonForecast, ErrorEvent
from metatune.errors import ConfigurationError
from metatune.settings import Settings
from metatune_forecaster.adapters.carbon_aware_sdk import CarbonAwareSdkSource
from metatune_forecaster.adapters.electricity_maps import ElectricityMapsSource
from metatune_forecaster.adapters.live import LiveIntensity, LiveSource, region_sources
from metatune_forecaster.adapters.model_files import load_weather_error
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.adapters.replay import ReplayData, ReplayIntensity, ReplayWeather
from metatune_forecaster.adapters.runtime import RegionForecaster, sites_of
from metatune_forecaster.adapters.store import ObservationStore
from metatune_forecaster.adapters.uk_carbon_intensity import UkCarbonIntensitySource
from metatune_forecaster.adapters.watttime import WattTimeSource
from metatune_forecaster.app import create_service
from metatune_forecaster.domain.features import HISTORY_HOURS
from metatune_forecaster.domain.model import CarbonModel
from metatune_forecaster.domain.providers import ProviderUnavailable, Signal, SourceMisconfigured
from tests.support.builders import small_registry
from tests.support.waiting import received_on, wait_for

from .provider_api import FakeClock, ProviderApi, http
from .trace_source import TraceSource, store, trace

__all__ = ["store"]

ISSUE = datetime(2023, 6, 5, 0, tzinfo=UTC)  # inside the replayed year: no wrap-around
NOW = ISSUE + timedelta(minutes=1)


def bands(forecast: CarbonForecast) -> np.ndarray:
    return np.array([forecast.p10_g_per_kwh, forecast.g_per_kwh, forecast.p90_g_per_kwh])


def forecaster(model: CarbonModel, replay: ReplayData, intensity) -> RegionForecaster:
    weather = ReplayWeather(replay, load_weather_error(WEATHER_ERROR_PATH))
    sites = sites_of(small_registry("fra1"), ReplayIntensity(replay))
    return RegionForecaster(model, sites, weather, intensity)


@pytest.mark.asyncio
async def test_live_forecast_equals_the_replay_forecast_on_the_same_history(
    model: CarbonModel, replay: ReplayData, store: ObservationStore
) -> None:
    on_replay = forecaster(model, replay, ReplayIntensity(replay))
    expected = (await on_replay.forecast(on_replay.sites[0], ISSUE, NOW)).forecast
    assert expected is not None
    assert (expected.source, expected.signal, expected.history_hours) == ("replay", "average", 1344)

    source = TraceSource()
    live = forecaster(model, replay, LiveIntensity(store, {"DE": LiveSource(source, "DE")}))
    got = (await live.forecast(live.sites[0], ISSUE, NOW)).forecast
    assert got is not None
    np.testing.assert_allclose(bands(got), bands(expected), rtol=0, atol=1e-6)
    assert got.imputed_hours == expected.imputed_hours
    assert (got.source, got.signal, got.history_hours, got.short_history) == (
        "test-provider",
        "average",
        HISTORY_HOURS,
        False,
    )
    assert got.provider_hours == 0
    assert source.hours_asked() == HISTORY_HOURS and len(source.asked) == 1  # fetched once

    # the next hour asks for that hour alone; the provider's own 48 h forecast is blended in
    own_index = pd.date_range(ISSUE + timedelta(hours=1), periods=48, freq="h")
    source.own = trace("DE").reindex(own_index)
    nxt = ISSUE + timedelta(hours=1)
    blended = (await live.forecast(live.sites[0], nxt, nxt)).forecast
    assert source.asked[1:] == [(pd.Timestamp(ISSUE), pd.Timestamp(nxt))]
    source.own = None
    alone = (await live.forecast(live.sites[0], nxt, nxt)).forecast
    assert blended is not None and alone is not None and blended.provider_hours == 48
    mid, model_mid = np.array(blended.g_per_kwh), np.array(alone.g_per_kwh)
    np.testing.assert_allclose(
        mid[:48], 0.5 * source_own_values(own_index) + 0.5 * model_mid[:48], atol=0.011
    )
    np.testing.assert_array_equal(mid[48:], model_mid[48:])  # the model extends it to 168 h
    width = np.array(alone.p90_g_per_kwh) - model_mid
    np.testing.assert_allclose(np.array(blended.p90_g_per_kwh) - mid, width, atol=0.021)
    assert len(source.asked) == 2  # the third forecast of that hour fetched nothing

    # the provider goes down: the last good forecast, shifted and stale, and why
    source.down = ProviderUnavailable("test-provider answered HTTP 503 to /history")
    later = ISSUE + timedelta(hours=3)
    outcome = await live.forecast(live.sites[0], later, later)
    assert outcome.forecast is not None and outcome.forecast.stale
    assert outcome.forecast.source == "test-provider" and "503" in (outcome.failure or "")
    assert outcome.code == "provider_unavailable"
    source.down = SourceMisconfigured("test-provider refused the key: check METATUNE_TEST_FILE")
    refused = await live.forecast(live.sites[0], later, later)
    assert refused.code == "source_misconfigured" and refused.forecast is not None


def source_own_values(index: pd.DatetimeIndex) -> np.ndarray:
    return trace("DE").reindex(index).to_numpy()


@pytest.mark.asyncio
async def test_a_zone_with_two_weeks_of_history_gets_a_flagged_forecast(
    model: CarbonModel, replay: ReplayData, store: ObservationStore
) -> None:
    young = TraceSource(signal=Signal.marginal, available_from=ISSUE - timedelta(days=14))
    live = forecaster(model, replay, LiveIntensity(store, {"DE": LiveSource(young, "DE")}))
    outcome = await live.forecast(live.sites[0], ISSUE, NOW)
    forecast = outcome.forecast
    assert outcome.failure is None and forecast is not None and not forecast.stale
    assert (forecast.history_hours, forecast.short_history, forecast.signal) == (
        14 * 24,
        True,
        "marginal",
    )
    assert len(forecast.g_per_kwh) == 168 and all(np.isfinite(forecast.g_per_kwh))

    # the hours the provider never had are not asked again every hour (only recent ones are)
    asked = len(young.asked)
    nxt = ISSUE + timedelta(hours=1)
    await live.forecast(live.sites[0], nxt, nxt)
    assert young.asked[asked:] == [(pd.Timestamp(ISSUE), pd.Timestamp(nxt))]


@pytest.mark.asyncio
async def test_the_service_publishes_live_forecasts_naming_their_source(
    module_nats: str, store: ObservationStore
) -> None:
    settings = Settings(
        nats_url=module_nats,
        clock="simulated",
        sim_seconds_per_hour=3600.0,
        sim_start=ISSUE,
        heartbeat_s=0.5,
    )
    source = TraceSource()
    nc = await nats.connect(settings.nats_url)
    forecasts = await received_on(nc, subjects.forecasts("DE"), CarbonForecast)
    errors = await received_on(nc, subjects.errors("forecaster"), ErrorEvent)
    service = create_service(
        settings=settings,
        registry=small_registry("fra1"),
        sources={"DE": LiveSource(source, "DE")},
        store=store,
    )
    try:
        async with service.running():
            await wait_for(lambda: forecasts or errors, "a forecast of DE")
    finally:
        await nc.close()
    assert errors == []
    assert (forecasts[0].source, forecasts[0].history_hours) == ("test-provider", HISTORY_HOURS)
    assert source.hours_asked() >= HISTORY_HOURS


@pytest.mark.asyncio
async def test_regions_without_a_live_source_replay_and_a_source_without_its_key_stops_start_up(
    replay: ReplayData, store: ObservationStore
) -> None:
    live = LiveIntensity(
        store, {"DE": LiveSource(TraceSource(), "DE")}, fallback=ReplayIntensity(replay)
    )
    history = await live.history("NO", ISSUE, 48)
    expected = await ReplayIntensity(replay).history("NO", ISSUE, 48)
    pd.testing.assert_series_equal(history, expected)
    assert live.source_of("NO") == ("replay", Signal.average)
    assert live.source_of("DE") == ("test-provider", Signal.average)
    assert "DE" in live.regions() and "NO" in live.regions()

    def no_key(name: str, settings: Settings):
        raise SourceMisconfigured(
            "the Electricity Maps token is not set: set METATUNE_ELECTRICITYMAPS_TOKEN_FILE"
        )

    with pytest.raises(
        ConfigurationError, match=r"datacenter fra1: .*METATUNE_ELECTRICITYMAPS_TOKEN_FILE"
    ):
        region_sources(small_registry("fra1"), Settings(), include_replay=True, build=no_key)


@pytest.mark.asyncio
async def test_electricity_maps_responses_give_the_replay_path_its_exact_model_inputs(
    replay: ReplayData, store: ObservationStore
) -> None:
    """8 weeks of Electricity Maps v3 ``past-range`` responses (built from the same real trace)
    through the adapter and the store give the history the replay path forecasts from, value
    for value: the live forecast is then the replay's (see the test above)."""

    def past_range(request: httpx.Request) -> httpx.Response:
        start, end = (pd.Timestamp(request.url.params[k]) for k in ("start", "end"))
        series = trace(request.url.params["zone"])
        page = series[(series.index >= start) & (series.index < end)]
        records = [
            {
                "zone": "DE",
                "carbonIntensity": value,
                "datetime": hour.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "updatedAt": "2023-07-01T00:00:00.000Z",
                "createdAt": "2023-06-01T00:00:00.000Z",
                "emissionFactorType": "direct",
                "isEstimated": False,
                "estimationMethod": None,
            }
            for hour, value in page.items()
        ]
        return httpx.Response(200, json={"zone": "DE", "data": records})

    api = ProviderApi(past_range)
    source = ElectricityMapsSource(SecretStr("test-token"), http(api, FakeClock()), now=lambda: NOW)
    live = LiveIntensity(store, {"DE": LiveSource(source, "DE")})
    history = await live.history("DE", ISSUE, HISTORY_HOURS)
    expected = await ReplayIntensity(replay).history("DE", ISSUE, HISTORY_HOURS)
    np.testing.assert_array_equal(history.index, expected.index)
    np.testing.assert_allclose(history.to_numpy(), expected.to_numpy(), rtol=0, atol=1e-9)
    assert api.paths() == ["/v3/carbon-intensity/past-range"] * 6  # 1344 h in pages of 240 h
    assert await store.sources("DE", Signal.average, ISSUE - timedelta(days=56), ISSUE) == {
        "electricity-maps": HISTORY_HOURS
    }


# ---------------------------------------------------------------- every provider, end to end
LB_PER_G = 1 / 0.453592  # WattTime answers lbs/MWh; 1 lb/MWh = 0.453592 g/kWh


def _hours(params_start: str, params_end: str) -> pd.Series:
    start, end = pd.Timestamp(params_start), pd.Timestamp(params_end)
    series = trace("DE")
    return series[(series.index >= start) & (series.index < end)]


def _watttime(request: httpx.Request) -> httpx.Response:
    """WattTime v3: a token at /login, then 5-minute points in lbs/MWh."""
    meta = {"region": "DE", "signal_type": "co2_moer", "units": "lbs_co2_per_mwh"}
    if request.url.path == "/login":
        return httpx.Response(200, json={"token": "wt-bearer"})
    if request.url.path == "/v3/forecast":  # none published for this hour: the model's alone
        return httpx.Response(200, json={"data": [], "meta": meta})
    points = [
        {"point_time": (hour + pd.Timedelta(minutes=m)).isoformat(), "value": value * LB_PER_G}
        for hour, value in _hours(request.url.params["start"], request.url.params["end"]).items()
        for m in range(0, 60, 5)
    ]
    return httpx.Response(200, json={"data": points, "meta": meta})


def _uk(request: httpx.Request) -> httpx.Response:
    """The GB Carbon Intensity API, national: /intensity/{from}/{to}, half-hours."""
    frm, to = request.url.path.strip("/").split("/")[1:3]
    if to == "fw48h":  # no forecast published for this hour: the model's alone
        return httpx.Response(200, json={"data": []})
    rows = [
        {
            "from": (hour + half).strftime("%Y-%m-%dT%H:%MZ"),
            "to": (hour + half + pd.Timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%MZ"),
            "intensity": {"forecast": value, "actual": value, "index": "moderate"},
        }
        for hour, value in _hours(frm, to).items()
        for half in (pd.Timedelta(0), pd.Timedelta(minutes=30))
    ]
    return httpx.Response(200, json={"data": rows})


def _carbon_aware(request: httpx.Request) -> httpx.Response:
    """The Carbon Aware SDK WebAPI: /emissions/bylocation, EmissionsData records."""
    params = request.url.params
    if request.url.path != "/emissions/bylocation":  # no forecast data source configured
        return httpx.Response(404, json={"title": "no forecast data source"})
    rows = [
        {
            "location": params["location"],
            "time": hour.isoformat(),
            "rating": value,
            "duration": "01:00:00",
        }
        for hour, value in _hours(params["time"], params["toTime"]).items()
    ]
    return httpx.Response(200, json=rows)


def _source(kind: str) -> tuple[Any, str, Signal]:
    if kind == "watttime":
        api = ProviderApi(_watttime)
        return WattTimeSource("u", SecretStr("p"), http(api, FakeClock())), "DE", Signal.marginal
    if kind == "uk-carbon-intensity":
        return (
            UkCarbonIntensitySource(http(ProviderApi(_uk), FakeClock())),
            "national",
            Signal.average,
        )
    api = ProviderApi(_carbon_aware)
    return CarbonAwareSdkSource(http(api, FakeClock()), Signal.average), "de", Signal.average


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["watttime", "uk-carbon-intensity", "carbon-aware-sdk"])
async def test_each_provider_format_gives_the_replay_forecast_on_the_same_history(
    kind: str, model: CarbonModel, replay: ReplayData, store: ObservationStore
) -> None:
    """8 weeks of the real DE trace in each provider's own response format, through its adapter,
    the store and the forecaster: the forecast is the replay path's, and says what it carries."""
    on_replay = forecaster(model, replay, ReplayIntensity(replay))
    expected = (await on_replay.forecast(on_replay.sites[0], ISSUE, NOW)).forecast
    source, zone, signal = _source(kind)
    live = forecaster(model, replay, LiveIntensity(store, {"DE": LiveSource(source, zone)}))
    got = (await live.forecast(live.sites[0], ISSUE, NOW)).forecast
    assert expected is not None and got is not None
    np.testing.assert_allclose(bands(got), bands(expected), rtol=0, atol=1e-6)
    assert (got.source, got.signal, got.history_hours) == (source.name, signal.value, 1344)
    assert got.provider_hours == 0 and not got.stale
