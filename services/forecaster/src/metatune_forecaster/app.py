"""The forecaster service: on every clock tick, publish ``metatune.forecasts.<region>`` for each
region of the datacenter registry (fresh, or the last good one shifted and marked stale, with an
error event, when a provider fails; the last good one is kept in KV, so it survives a restart).
Each hour's round runs once (:mod:`.domain.rounds`); one that ends after its hour is an error
event, and the heartbeat carries the lag behind the clock."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from metatune.contracts import ClockTick
from metatune.registry import Registry
from metatune.service import Service
from metatune.settings import Settings

from .adapters.live import LiveIntensity, LiveSource, region_kinds, region_sources
from .adapters.model_files import load_model, load_weather_error
from .adapters.open_meteo import OpenMeteoWeather
from .adapters.package_data import MODEL_PATH, REPLAY_PATH, WEATHER_ERROR_PATH
from .adapters.publisher import ForecastPublisher
from .adapters.replay import ReplayData, ReplayIntensity, ReplayWeather
from .adapters.runtime import RegionForecaster, sites_of
from .adapters.store import ObservationStore
from .domain.providers import EmissionFactors, IntensityProvider, Site, WeatherProvider
from .domain.signals import deployment_signal
from .settings import ForecasterSettings


def weather_provider(settings: ForecasterSettings, data: ReplayData) -> WeatherProvider:
    if settings.forecaster_weather == "open-meteo":
        return OpenMeteoWeather(
            settings.open_meteo_url,
            settings.open_meteo_timeout_s,
            settings.open_meteo_retries,
            settings.open_meteo_backoff_s,
        )
    return ReplayWeather(
        data, load_weather_error(settings.forecaster_weather_error_path or WEATHER_ERROR_PATH)
    )


def replay_data(settings: ForecasterSettings) -> ReplayData:
    """The replay extract the settings name (unset: the embedded one)."""
    return ReplayData(settings.forecaster_replay_path or REPLAY_PATH)


def region_forecaster(
    settings: ForecasterSettings,
    data: ReplayData,
    sites: list[Site],
    intensity: IntensityProvider,
    weather: WeatherProvider | None = None,
) -> RegionForecaster:
    """The round over ``sites`` (the service's: every registry region; ``metatune forecaster
    forecast``: one), with the model and the weather provider the settings name."""
    return RegionForecaster(
        load_model(settings.forecaster_model_path or MODEL_PATH),
        sites,
        weather or weather_provider(settings, data),
        intensity,
        factors=EmissionFactors(settings.emission_factors),
    )


def intensity_for(
    settings: ForecasterSettings,
    data: ReplayData,
    registry: Registry,
    sources: Mapping[str, LiveSource] | None,
    store: ObservationStore | None,
) -> tuple[IntensityProvider, ObservationStore | None]:
    """Where each region's history comes from: the replay extract ``data``, or with any live region the
    observation ``store`` (default: the one at ``database_url``), extended from the source each
    hour. A registry that mixes average and marginal sources, or a source of other emission
    factors than the setting's, is a ConfigurationError (:mod:`.domain.signals`)."""
    replay = ReplayIntensity(data)
    live = dict(sources) if sources is not None else region_sources(registry, settings)
    deployment_signal(
        region_kinds(registry.regions(), live), EmissionFactors(settings.emission_factors)
    )
    if not live:
        return replay, store
    store = store or ObservationStore(
        settings.database_url, connect_timeout_s=settings.connect_timeout_s
    )
    return LiveIntensity(store, live, fallback=replay), store


def create_service(
    settings: Settings | None = None,
    registry: Registry | None = None,
    weather: WeatherProvider | None = None,
    sources: Mapping[str, LiveSource] | None = None,
    store: ObservationStore | None = None,
) -> Service[ForecastPublisher]:
    """Build the service; a region without data, a live source that cannot be built (no key), a
    registry that mixes signals (:func:`intensity_for`), or an unusable model is a
    ConfigurationError here, at start-up, not at the first hour.

    ``sources``: each region's live source (default: those the registry entries name, through
    ``intensity_source``/``intensity_zone``); regions without one replay the embedded extract."""
    settings = ForecasterSettings.of(settings)
    registry = registry or settings.registry()
    data = replay_data(settings)
    intensity, store = intensity_for(settings, data, registry, sources, store)
    forecaster = region_forecaster(
        settings, data, sites_of(registry, intensity), intensity, weather
    )
    service: Service[ForecastPublisher] = Service("forecaster", settings=settings)
    publisher = service.runtime = ForecastPublisher(service, forecaster)
    if store is not None:
        service.app.after_shutdown(store.close)

    @service.on_tick
    async def on_tick(tick: ClockTick) -> None:
        await publisher.publish_round(tick.hour)

    @service.background
    async def first_round() -> None:
        """Publish for the current hour at start-up, so consumers do not wait for the next tick."""
        await publisher.publish_round(service.clock.current_hour())

    @service.background
    async def lag_in_heartbeat() -> None:
        """The lag grows while no round ends: the heartbeat shows it as it is."""
        while True:
            publisher.show_lag()
            await asyncio.sleep(settings.heartbeat_s)

    return service
