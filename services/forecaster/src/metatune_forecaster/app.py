"""The forecaster service: on every clock tick, publish ``metatune.forecasts.<region>`` for each
region of the datacenter registry (fresh, or the last good one shifted and marked stale, with an
error event, when a provider fails)."""

from __future__ import annotations

from datetime import datetime

from metatune import subjects
from metatune.contracts import ClockTick, ErrorKind
from metatune.registry import Registry, default_registry
from metatune.service import Service
from metatune.settings import Settings

from .adapters.open_meteo import OpenMeteoWeather
from .adapters.replay import ReplayData, ReplayIntensity, ReplayWeather
from .config import ForecasterSettings
from .domain.model import CarbonModel
from .domain.providers import WeatherProvider
from .domain.weather_error import WeatherErrorModel
from .forecasting import RegionForecaster, sites_of


def weather_provider(config: ForecasterSettings, data: ReplayData) -> WeatherProvider:
    if config.weather == "open-meteo":
        return OpenMeteoWeather(
            config.open_meteo_url, config.open_meteo_timeout_s, config.open_meteo_retries, config.open_meteo_backoff_s
        )
    return ReplayWeather(data, WeatherErrorModel.load(config.weather_error_path))


def create_service(
    settings: Settings | None = None,
    config: ForecasterSettings | None = None,
    registry: Registry | None = None,
    weather: WeatherProvider | None = None,
) -> Service:
    """Build the service; a region without data or an unusable model is a ConfigurationError here,
    at start-up, not at the first hour."""
    config = config or ForecasterSettings()
    registry = registry or default_registry()
    data = ReplayData(config.replay_path)
    intensity = ReplayIntensity(data)
    forecaster = RegionForecaster(
        CarbonModel.load(config.model_path),
        sites_of(registry, intensity),
        weather or weather_provider(config, data),
        intensity,
    )
    service = Service("forecaster", settings=settings)

    async def publish_round(hour: datetime) -> None:
        for outcome in await forecaster.round(hour, service.clock.now()):
            subject = subjects.forecasts(outcome.region)
            if outcome.failure is not None:
                await service.report_error(
                    code="provider_unavailable",
                    kind=ErrorKind.unavailable,
                    message=f"{outcome.region} at {hour:%Y-%m-%dT%H:%MZ}: {outcome.failure}",
                    subject=subject,
                    details={"region": outcome.region, "hour": hour.isoformat(), "stale_published": outcome.forecast is not None},
                )
            if outcome.forecast is not None:
                await service.publish(subject, outcome.forecast, msg_id=f"forecast-{outcome.region}-{hour.isoformat()}")
        service.status_details = {"last_hour": hour.isoformat(), "model": forecaster.model.version}

    @service.on_tick
    async def on_tick(tick: ClockTick) -> None:
        await publish_round(tick.hour)

    @service.background
    async def first_round() -> None:
        """Publish for the current hour at start-up, so consumers do not wait for the next tick."""
        await publish_round(service.clock.current_hour())

    return service
