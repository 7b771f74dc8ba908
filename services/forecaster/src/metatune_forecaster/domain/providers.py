"""What the forecaster needs from the outside world, behind two small interfaces.

A :class:`WeatherProvider` gives hourly weather at a site: observed (or analysed) for past
hours and forecast for future ones; an :class:`IntensityProvider` gives the observed carbon
intensity of a region. Both raise :class:`ProviderUnavailable` when they cannot answer, which
the service turns into a stale forecast and an error event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

import pandas as pd

from metatune.errors import MetaTuneError


class ProviderUnavailable(MetaTuneError):
    """A weather or intensity source did not answer (down, slow, or no data for those hours)."""


class ProviderTransient(ProviderUnavailable):
    """A failure worth another try (429, 5xx, a network error); ``retry_after`` in seconds, when
    the provider said how long to wait."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Site:
    """Where a region's weather is taken: its datacenter (or zone) coordinates."""

    region: str
    latitude: float
    longitude: float


class WeatherProvider(Protocol):
    name: str

    async def hourly(
        self, site: Site, issue: datetime, past_hours: int, future_hours: int
    ) -> pd.DataFrame:
        """Hourly weather on ``[issue - past_hours, issue + future_hours)``, UTC index, columns
        ``temperature_c``, ``wind_ms``, ``cloud_pct`` (NaN where unknown). Hours ``>= issue``
        are forecasts issued at ``issue``."""
        ...


class IntensityProvider(Protocol):
    name: str

    def regions(self) -> list[str]:
        """Regions it has data for (checked against the registry at start-up)."""
        ...

    async def history(self, region: str, issue: datetime, hours: int) -> pd.Series:
        """Observed intensity (gCO2eq/kWh) of the ``hours`` hours before ``issue``, UTC index."""
        ...

    def source_of(self, region: str) -> tuple[str, Signal]:
        """The name of the source whose observations feed ``region`` and the kind of intensity
        they are (what the region's forecasts carry)."""
        ...

    async def provider_forecast(self, region: str, issue: datetime, hours: int) -> pd.Series | None:
        """The source's own forecast for ``[issue, issue + hours)`` (see
        :meth:`IntensitySource.forecast`), or None where it has none."""
        ...


class Signal(StrEnum):
    """What an intensity figure measures. Average (location-based) and marginal intensities are
    different quantities: a forecast carries one kind, never a mix."""

    average = "average"
    marginal = "marginal"


class EmissionFactors(StrEnum):
    """Which emissions a gram of an intensity counts: ``direct`` (combustion at the plant, what the
    forecaster's model and replay were built on) or ``lifecycle`` (also building, fuel supply and
    decommissioning: wind and nuclear are no longer zero). A deployment uses one
    (``METATUNE_EMISSION_FACTORS``); a source that gives the other is refused."""

    direct = "direct"
    lifecycle = "lifecycle"


class IntensitySource(Protocol):
    """A live grid-data provider (Electricity Maps, WattTime, a public grid operator's API, the
    Carbon Aware SDK): observed hourly intensity of a zone and, where the provider has one, its
    own forecast. Implementations live in ``adapters/``; they raise :class:`ProviderUnavailable`
    when the provider cannot answer and :class:`SourceMisconfigured` on 401/403."""

    name: str
    signal: Signal
    factors: EmissionFactors  # the emission factors of every figure it gives

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        """Observed intensity (gCO2eq/kWh) of each hour in ``[start, end)``: a float Series on an
        hourly, tz-aware UTC index, sorted, one value per hour (duplicates resolved, hours the
        provider lacks simply absent)."""
        ...

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        """The provider's own forecast for ``[issue, issue + hours)`` on the same kind of index,
        or ``None`` when it publishes none for this zone (or the tier does not include it)."""
        ...


class SourceMisconfigured(ProviderUnavailable):
    """The provider refused our credentials (401/403) or the source is set up wrongly; the message
    names the setting to fix and never contains the credential."""
