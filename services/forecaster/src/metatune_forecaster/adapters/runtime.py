"""One forecast round: for every region of the registry, a fresh forecast or a stale one.

Holds the model, the providers and the last good forecast of each region; knows nothing of the
bus (app.py publishes what it returns).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

from metatune.contracts import CarbonForecast
from metatune.errors import ConfigurationError
from metatune.registry import Registry

from ..domain.blend import labelled
from ..domain.features import HISTORY_HOURS
from ..domain.forecast import InsufficientHistory, make_forecast, shift_stale, with_observed
from ..domain.model import CarbonModel
from ..domain.providers import (
    EmissionFactors,
    IntensityProvider,
    ProviderUnavailable,
    Site,
    SourceMisconfigured,
    WeatherProvider,
)

HORIZON_H = 168


@dataclass(frozen=True)
class Outcome:
    """What a region got this hour: a forecast (fresh or stale), or none, and why not fresh."""

    region: str
    forecast: CarbonForecast | None
    failure: str | None = None
    code: str = "provider_unavailable"  # the error event's code: source_misconfigured for 401/403


def sites_of(registry: Registry, intensity: IntensityProvider) -> list[Site]:
    """One weather site per region (its first datacenter); every region must have intensity data.

    Raises ConfigurationError at start-up, listing the regions the intensity source lacks.
    """
    known = set(intensity.regions())
    unknown = sorted(set(registry.regions()) - known)
    if unknown:
        raise ConfigurationError(
            f"datacenter registry names regions with no carbon-intensity source ({intensity.name}): "
            f"{', '.join(unknown)}; known regions: {', '.join(sorted(known))}"
        )
    sites = region_sites(registry)
    return [sites[region] for region in sorted(sites)]


def region_sites(registry: Registry) -> dict[str, Site]:
    """Each region's weather site: its first datacenter's coordinates."""
    sites: dict[str, Site] = {}
    for dc in registry.datacenters:
        sites.setdefault(dc.region, Site(dc.region, dc.latitude, dc.longitude))
    return sites


class RegionForecaster:
    def __init__(
        self,
        model: CarbonModel,
        sites: list[Site],
        weather: WeatherProvider,
        intensity: IntensityProvider,
        *,
        factors: EmissionFactors = EmissionFactors.direct,
    ) -> None:
        self.model = model
        self.factors = factors  # the deployment's: every source was checked to give these
        self.sites = sites
        self.weather = weather
        self.intensity = intensity
        self.last_good: dict[str, CarbonForecast] = {}

    async def forecast(self, site: Site, hour: datetime, now: datetime) -> Outcome:
        try:
            history = await self.intensity.history(site.region, hour, HISTORY_HOURS)
            weather = await self.weather.hourly(site, hour, HISTORY_HOURS, HORIZON_H)
            fresh = (
                await asyncio.to_thread(  # CPU-bound: keep the event loop (acks, heartbeats) free
                    make_forecast,
                    self.model,
                    site.region,
                    site.latitude,
                    site.longitude,
                    hour,
                    history,
                    weather,
                    now,
                )
            )
            own = await self.intensity.provider_forecast(site.region, hour, HORIZON_H)
        except (ProviderUnavailable, InsufficientHistory) as exc:
            last = self.last_good.get(site.region)
            stale = (
                shift_stale(last, hour, now) if last is not None and last.start <= hour else None
            )
            code = (
                "source_misconfigured"
                if isinstance(exc, SourceMisconfigured)
                else "provider_unavailable"
            )
            return Outcome(site.region, stale, str(exc), code)
        source, signal = self.intensity.source_of(site.region)
        fresh = labelled(fresh, history, source, signal, own)
        fresh = with_observed(fresh, history, source, str(signal))
        fresh = fresh.model_copy(update={"emission_factors": self.factors.value})
        self.last_good[site.region] = fresh
        return Outcome(site.region, fresh)

    async def round(self, hour: datetime, now: datetime) -> list[Outcome]:
        return [await self.forecast(site, hour, now) for site in self.sites]
