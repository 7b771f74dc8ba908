"""The forecaster service: on every clock tick, publish ``metatune.forecasts.<region>`` for each
region of the datacenter registry (fresh, or the last good one shifted and marked stale, with an
error event, when a provider fails; the last good one is kept in KV, so it survives a restart).
Each hour's round runs once (:mod:`.domain.rounds`); one that ends after its hour is an error
event, and the heartbeat carries the lag behind the clock."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime

from metatune import msgids, subjects
from metatune.bus import forecasts
from metatune.contracts import ClockTick, ErrorKind
from metatune.registry import Registry
from metatune.service import Service
from metatune.settings import Settings

from .adapters.live import LiveIntensity, LiveSource, region_kinds, region_sources
from .adapters.model_files import load_model, load_weather_error
from .adapters.open_meteo import OpenMeteoWeather
from .adapters.package_data import MODEL_PATH, REPLAY_PATH, WEATHER_ERROR_PATH
from .adapters.replay import ReplayData, ReplayIntensity, ReplayWeather
from .adapters.runtime import RegionForecaster, sites_of
from .adapters.store import ObservationStore
from .domain.providers import EmissionFactors, IntensityProvider, Site, WeatherProvider
from .domain.rounds import Rounds
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


def create_service(
    settings: Settings | None = None,
    registry: Registry | None = None,
    weather: WeatherProvider | None = None,
    sources: Mapping[str, LiveSource] | None = None,
    store: ObservationStore | None = None,
) -> Service[RegionForecaster]:
    """Build the service; a region without data, a live source that cannot be built (no key), a
    registry that mixes average and marginal sources or a source of other emission factors than
    the setting's (:mod:`.domain.signals`), or an unusable model is a ConfigurationError here, at
    start-up, not at the first hour.

    ``sources``: each region's live source (default: those the registry entries name, through
    ``intensity_source``/``intensity_zone``); regions without one replay the embedded extract.
    With any live region, history is served from the observation ``store`` (default: the one at
    ``database_url``), extended from the source each hour."""
    settings = ForecasterSettings.of(settings)
    registry = registry or settings.registry()
    data = replay_data(settings)
    replay = ReplayIntensity(data)
    live = dict(sources) if sources is not None else region_sources(registry, settings)
    deployment_signal(
        region_kinds(registry.regions(), live), EmissionFactors(settings.emission_factors)
    )
    intensity: IntensityProvider = replay
    if live:
        store = store or ObservationStore(
            settings.database_url, connect_timeout_s=settings.connect_timeout_s
        )
        intensity = LiveIntensity(store, live, fallback=replay)
    forecaster = region_forecaster(
        settings, data, sites_of(registry, intensity), intensity, weather
    )
    service: Service[RegionForecaster] = Service("forecaster", settings=settings)
    service.runtime = forecaster
    if store is not None:
        service.app.after_shutdown(store.close)

    rounds, one_at_a_time = Rounds(), asyncio.Lock()  # the start-up round and a tick's
    recalled = asyncio.Event()  # the kept last good forecasts were read back

    def show_lag() -> None:
        now = service.clock.now()
        service.health_status = "behind" if rounds.behind(now) else "ok"
        service.status_details = {
            "last_hour": rounds.completed.isoformat() if rounds.completed else "",
            "lag_s": f"{rounds.lag(now).total_seconds():.0f}",
            "model": forecaster.model.version,
        }

    async def publish_round(hour: datetime) -> None:
        if not rounds.claim(hour):
            return  # this hour's round ran, or runs, already (a tick delivered again)
        try:
            async with one_at_a_time:
                await forecast_and_publish(hour)
        except BaseException:
            rounds.abandon(hour)
            raise
        overrun = rounds.finish(hour, service.clock.now())
        if overrun is not None:
            await service.report_error(
                code="round_overran",
                kind=ErrorKind.unavailable,
                message=f"the round of {hour:%Y-%m-%dT%H:%MZ} ended {overrun} after its hour",
                details={"hour": hour.isoformat(), "overrun_s": f"{overrun.total_seconds():.0f}"},
            )
        show_lag()

    async def forecast_and_publish(hour: datetime) -> None:
        if not recalled.is_set():  # before the first round: what a previous process kept
            regions = [site.region for site in forecaster.sites]
            forecaster.last_good.update(await forecasts.recall(service.js, regions))
            recalled.set()
        for outcome in await forecaster.round(hour, service.clock.now()):
            subject = subjects.forecasts(outcome.region)
            if outcome.failure is not None:
                await service.report_error(
                    code=outcome.code,
                    kind=ErrorKind.unavailable,
                    message=f"{outcome.region} at {hour:%Y-%m-%dT%H:%MZ}: {outcome.failure}",
                    subject=subject,
                    details={
                        "region": outcome.region,
                        "hour": hour.isoformat(),
                        "stale_published": outcome.forecast is not None,
                    },
                )
            if outcome.failure is None and outcome.forecast is not None:
                await forecasts.keep(service.js, outcome.forecast)  # kept before anyone sees it
            if outcome.forecast is not None:
                await service.publish(
                    subject, outcome.forecast, msg_id=msgids.forecast(outcome.region, hour)
                )

    @service.on_tick
    async def on_tick(tick: ClockTick) -> None:
        await publish_round(tick.hour)

    @service.background
    async def first_round() -> None:
        """Publish for the current hour at start-up, so consumers do not wait for the next tick."""
        await publish_round(service.clock.current_hour())

    @service.background
    async def lag_in_heartbeat() -> None:
        """The lag grows while no round ends: the heartbeat shows it as it is."""
        while True:
            show_lag()
            await asyncio.sleep(settings.heartbeat_s)

    return service
