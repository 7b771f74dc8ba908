"""The forecaster service on a real NATS, driven by simulated clock ticks."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import nats
import pytest
from nats.js.errors import NotFoundError

from metatune import subjects
from metatune.bus.clock import reset_anchor
from metatune.bus.streams import HEALTH_BUCKET
from metatune.clock import new_anchor
from metatune.contracts import CarbonForecast, ErrorEvent, ErrorKind, ServiceHealth
from metatune.errors import ConfigurationError
from metatune.registry import Registry, default_registry
from metatune_forecaster.adapters.open_meteo import OpenMeteoWeather
from metatune_forecaster.adapters.replay import ReplayData, ReplayWeather
from metatune_forecaster.app import create_service, weather_provider
from metatune_forecaster.domain.forecast import shift_stale
from metatune_forecaster.settings import ForecasterSettings
from tests.support.builders import small_registry
from tests.support.secured_bus import SecuredBus
from tests.support.waiting import received_on, wait_for

SIM_START = datetime(2025, 6, 2, 0, tzinfo=UTC)


async def collect(
    settings: ForecasterSettings, service_kwargs: dict, until
) -> tuple[list[CarbonForecast], list[ErrorEvent]]:
    nc = await nats.connect(settings.nats_url)
    forecasts: list[CarbonForecast] = await received_on(nc, subjects.FORECASTS_ALL, CarbonForecast)
    errors: list[ErrorEvent] = await received_on(nc, subjects.errors("forecaster"), ErrorEvent)
    service = create_service(settings=settings, **service_kwargs)
    try:
        async with service.running():
            # rounds of three regions at 2 s an hour: a loaded machine needs far longer than 60 s
            await wait_for(lambda: until(forecasts, errors), "the forecasts awaited", timeout=240)
    finally:
        await nc.close()
    return forecasts, errors


@pytest.mark.asyncio
async def test_publishes_every_region_on_each_simulated_hour(module_nats: str) -> None:
    settings = ForecasterSettings(
        nats_url=module_nats,
        clock="simulated",
        sim_seconds_per_hour=2.0,
        sim_start=SIM_START,
        heartbeat_s=0.5,
    )
    registry = small_registry("fra1", "osl1", "sjc1")

    def three_hours(forecasts: list[CarbonForecast], errors: list) -> bool:
        return len({f.start for f in forecasts}) >= 3

    forecasts, errors = await collect(settings, {"registry": registry}, three_hours)
    # on a loaded machine a round may outlast a 2 s hour: said so, and nothing else went wrong
    assert [e for e in errors if e.code != "round_overran"] == []
    hours = sorted({f.start for f in forecasts})
    # the first hour is whichever simulated hour the service reached once started (2 s an hour:
    # a loaded machine may take several), on the hour grid from SIM_START
    assert hours[0] >= SIM_START and (hours[0] - SIM_START) % timedelta(hours=1) == timedelta(0)
    assert all(b - a == hours[1] - hours[0] for a, b in itertools.pairwise(hours))
    for hour in hours[:2]:
        assert {f.region for f in forecasts if f.start == hour} == {"DE", "NO", "US-CAL-CISO"}
    assert all(not f.stale and len(f.g_per_kwh) == 168 and f.start.minute == 0 for f in forecasts)
    # each carries the observed hours before its start: what telemetry re-prices job-hours with
    for f in forecasts:
        assert f.observed is not None and f.observed.signal == "average"
        assert [h.hour for h in f.observed.hours] == [
            f.start - timedelta(hours=24 - i) for i in range(24)
        ]


@pytest.mark.asyncio
async def test_provider_down_means_an_error_event_and_no_fresh_forecast(private_nats: str) -> None:
    settings = ForecasterSettings(  # a bus of its own: no forecast kept by another test
        nats_url=private_nats,
        clock="simulated",
        sim_seconds_per_hour=2.0,
        sim_start=SIM_START,
        heartbeat_s=0.5,
    )
    down = OpenMeteoWeather(url="http://127.0.0.1:9/v1/forecast", retries=0, timeout_s=1.0)
    forecasts, errors = await collect(
        settings, {"registry": small_registry("fra1"), "weather": down}, lambda f, e: len(e) >= 2
    )
    assert forecasts == []  # nothing good to fall back on yet
    assert all(e.kind == ErrorKind.unavailable and e.code == "provider_unavailable" for e in errors)
    assert (
        errors[0].subject == subjects.forecasts("DE")
        and errors[0].details["stale_published"] is False
    )


def test_unknown_region_is_a_configuration_error_at_start_up() -> None:
    fra1 = default_registry().get("fra1")
    registry = Registry(
        datacenters=[fra1, fra1.model_copy(update={"name": "cdg1", "region": "FR"})]
    )
    with pytest.raises(ConfigurationError, match="FR"):
        create_service(registry=registry)


def test_settings_choose_the_model_and_the_weather_provider(tmp_path) -> None:
    broken = tmp_path / "model.joblib"
    broken.write_bytes(b"not a model")
    with pytest.raises(ConfigurationError, match=r"model\.joblib"):
        create_service(
            settings=ForecasterSettings(forecaster_model_path=broken),
            registry=small_registry("fra1"),
        )

    settings = ForecasterSettings(
        forecaster_weather="open-meteo",
        open_meteo_url="http://127.0.0.1:9/v1/forecast",
        open_meteo_retries=1,
        open_meteo_backoff_s=0.5,
    )
    provider = weather_provider(settings, ReplayData())
    assert isinstance(provider, OpenMeteoWeather)
    assert (provider.url, provider.retries, provider.backoff_s) == (
        "http://127.0.0.1:9/v1/forecast",
        1,
        0.5,
    )
    assert isinstance(weather_provider(ForecasterSettings(), ReplayData()), ReplayWeather)


def slow_weather(ack_wait_s: float) -> OpenMeteoWeather:
    """Weather that is down, and says so only after retrying for 3 ack waits (no one listens at
    port 9): each hour's round outlasts the tick consumer's ack wait."""
    return OpenMeteoWeather(
        url="http://127.0.0.1:9/v1/forecast", retries=2, timeout_s=1.0, backoff_s=ack_wait_s
    )


def per_hour(errors: list[ErrorEvent], code: str) -> Counter[str]:
    return Counter(e.details["hour"] for e in errors if e.code == code)


@pytest.mark.asyncio
async def test_a_round_slower_than_the_ack_wait_runs_once(private_nats: str) -> None:
    settings = ForecasterSettings(  # a clock of its own (the module's runs at another speed)
        nats_url=private_nats,
        clock="simulated",
        sim_seconds_per_hour=8.0,
        sim_start=SIM_START,
        heartbeat_s=0.5,
        ack_wait_s=1.0,
    )
    kwargs = {"registry": small_registry("fra1"), "weather": slow_weather(settings.ack_wait_s)}

    def two_ticks(forecasts: list, errors: list[ErrorEvent]) -> bool:
        return len(per_hour(errors, "provider_unavailable")) >= 3  # start-up, then two ticks

    _, errors = await collect(settings, kwargs, two_ticks)
    # the ticks are handled one after another: any second delivery of the first tick's hour
    # would have come before the second tick's round
    rounds = per_hour(errors, "provider_unavailable")
    assert set(rounds.values()) == {1}, rounds


@pytest.mark.asyncio
async def test_a_round_that_outlasts_its_hour_is_an_error_and_the_service_says_it_is_behind(
    private_nats: str,
) -> None:
    settings = ForecasterSettings(  # a clock of its own (the module's runs at another speed)
        nats_url=private_nats,
        clock="simulated",
        sim_seconds_per_hour=1.0,  # a round takes 3 s or more: 3 hours
        sim_start=SIM_START,
        heartbeat_s=0.5,
        ack_wait_s=1.0,
    )
    service = create_service(
        settings, registry=small_registry("fra1"), weather=slow_weather(settings.ack_wait_s)
    )
    nc = await nats.connect(settings.nats_url)
    errors: list[ErrorEvent] = await received_on(nc, subjects.errors("forecaster"), ErrorEvent)

    async def behind() -> ServiceHealth | None:
        health = await nc.jetstream().key_value(HEALTH_BUCKET)
        try:
            entry = await health.get(service.instance)
        except NotFoundError:  # no heartbeat yet
            return None
        reported = ServiceHealth.model_validate_json(entry.value or b"")
        return reported if reported.status == "behind" else None

    try:
        async with service.running():
            await wait_for(lambda: per_hour(errors, "round_overran"), "an overran round")
            heartbeat = await wait_for(behind, "a heartbeat saying the service is behind")
    finally:
        await nc.close()
    overran = next(e for e in errors if e.code == "round_overran")
    assert overran.kind == ErrorKind.unavailable and "after its hour" in overran.message
    assert float(heartbeat.details["lag_s"]) >= 3600 and heartbeat.details["last_hour"]


@pytest.mark.asyncio
async def test_a_forecaster_restarted_during_an_outage_publishes_its_last_good_forecast_stale(
    secured: SecuredBus, admin
) -> None:
    """Under its own NATS user, on a clock of its own (an hour an hour: one round each)."""
    settings = secured.settings(
        "forecaster", ForecasterSettings, clock="simulated", heartbeat_s=0.5
    )
    await reset_anchor(admin.jetstream(), new_anchor(3600.0, SIM_START))  # as `metatune up` does
    forecasts = await received_on(admin, subjects.FORECASTS_ALL, CarbonForecast)
    errors = await received_on(admin, subjects.errors("forecaster"), ErrorEvent)
    registry = small_registry("fra1")
    async with create_service(settings, registry=registry).running():
        kept = await wait_for(lambda: forecasts and forecasts[0], "a fresh forecast")
    # restarted while the weather provider is down: no fresh forecast, the kept one instead
    down = OpenMeteoWeather(url="http://127.0.0.1:9/v1/forecast", retries=0, timeout_s=1.0)
    async with create_service(settings, registry=registry, weather=down).running():
        await wait_for(lambda: len(forecasts) > 1 and errors, "the stale forecast")
    stale = forecasts[1]
    assert not kept.stale and stale.stale and stale.region == "DE"
    assert stale.issued_at == kept.issued_at and stale.source == kept.source
    assert stale.g_per_kwh == shift_stale(kept, stale.start, stale.occurred_at).g_per_kwh
    assert errors[0].code == "provider_unavailable" and errors[0].details["stale_published"]
