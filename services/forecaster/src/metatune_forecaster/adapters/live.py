"""Live intensity: a history that grows in the observation store, fed by a region's grid-data
source.

:class:`LiveIntensity` is the :class:`~..domain.providers.IntensityProvider` the forecaster uses
when a region names a live source. Asked for the 8 weeks before an issue, it reads what the store
holds, asks the source only for the hours the store lacks (the whole window once, then the new
hour each hour), stores the answer and serves the window from the store. Hours the provider did
not have are asked again only while they are recent (:data:`RECENT_RETRY_H`): a provider that
never had an hour is not asked for it every hour. Regions without a live source are served by a
fallback provider (the replay).

:func:`backfill` fills a window ahead of time, window by window (resumable: hours already stored
are skipped), and :func:`region_sources` builds the source each registry entry names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd

from metatune.errors import ConfigurationError, DatabaseUnavailable
from metatune.registry import Registry

from ..domain.observations import hours_between, runs
from ..domain.providers import (
    EmissionFactors,
    IntensityProvider,
    IntensitySource,
    ProviderUnavailable,
    Signal,
)
from ..domain.signals import RegionKind, factors_mismatch
from ..settings import ForecasterSettings
from .package_data import REPLAY_PATH
from .replay import ReplayData
from .store import ObservationStore, Upserted

log = logging.getLogger("metatune.forecaster.live")

RECENT_RETRY_H = 24  # missing hours this close to the issue are asked again each hour (late data)
MERGE_GAP_H = 24  # missing stretches this close together are asked for in one request
BACKFILL_WINDOW_H = 7 * 24  # hours per backfill request: the unit of progress and of resumption


@dataclass(frozen=True)
class LiveSource:
    """A region's live source and the provider's id of its grid zone."""

    source: IntensitySource
    zone: str

    @property
    def signal(self) -> Signal:
        return self.source.signal

    @property
    def factors(self) -> EmissionFactors:
        return self.source.factors


class ReplaySource:
    """The embedded replay extract as an :class:`IntensitySource` ("replay", average intensity):
    the default source of a registry entry that names none, so backfill and the live path run on
    the demo's data without a key."""

    name = "replay"
    signal = Signal.average
    factors = EmissionFactors.direct  # Electricity Maps' direct intensity

    def __init__(self, data: ReplayData) -> None:
        self.data = data

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        hours = hours_between(start, end)
        if hours.empty:
            return pd.Series(dtype=float, index=pd.DatetimeIndex([], tz="UTC"))
        return self.data.rows(zone, hours[0], len(hours))["ci_g_per_kwh"]

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        return None


def build_source(name: str, settings: ForecasterSettings) -> IntensitySource:
    """The source a registry entry names: the replay extract, or a live provider's adapter
    (``intensity_sources.py``) configured from settings."""
    if name == "replay":
        return ReplaySource(ReplayData(settings.forecaster_replay_path or REPLAY_PATH))
    from .intensity_sources import intensity_source

    return intensity_source(name, settings)


def region_sources(
    registry: Registry,
    settings: ForecasterSettings,
    *,
    include_replay: bool = False,
    only: str | None = None,
    build: Callable[[str, ForecasterSettings], IntensitySource] = build_source,
) -> dict[str, LiveSource]:
    """The source of each region whose registry entry names a live one (``intensity_source``,
    ``intensity_zone``: the zone defaults to the region); with ``include_replay`` also the regions
    on the replay (the CLI's backfill works on them too); ``only``: that region alone. One instance
    per source name. Raises
    ConfigurationError when a source cannot be built (unknown, or its key not set) or gives other
    emission factors than ``METATUNE_EMISSION_FACTORS``, naming the datacenter and the setting."""
    built: dict[str, IntensitySource] = {}
    out: dict[str, LiveSource] = {}
    wanted = EmissionFactors(ForecasterSettings.of(settings).emission_factors)
    for dc in registry.datacenters:
        name = str(getattr(dc, "intensity_source", None) or "replay")
        skip = (name == "replay" and not include_replay) or (only is not None and dc.region != only)
        if skip or dc.region in out:
            continue
        if name not in built:
            try:
                built[name] = build(name, settings)
            except ProviderUnavailable as exc:  # SourceMisconfigured: no key, unknown source
                raise ConfigurationError(f"datacenter {dc.name}: {exc}") from exc
        mismatch = factors_mismatch(name, built[name].factors, wanted)
        if mismatch:
            raise ConfigurationError(f"datacenter {dc.name}: {mismatch}")
        out[dc.region] = LiveSource(built[name], str(getattr(dc, "zone", None) or dc.region))
    return out


def region_kinds(regions: list[str], live: Mapping[str, LiveSource]) -> list[RegionKind]:
    """What each region's forecasts will measure: its live source's signal and emission factors,
    the replay's (average, direct) where it names none."""
    return [
        RegionKind(region, one.source.name, one.signal, one.factors)
        if (one := live.get(region)) is not None
        else RegionKind(region, ReplaySource.name, ReplaySource.signal, ReplaySource.factors)
        for region in regions
    ]


def usable(live: LiveSource, values: pd.Series) -> pd.Series:
    """``values`` without the hours a provider got wrong (negative, infinite, not a number, not on
    the hour), each left out with a warning, so one bad value costs its hour, not the forecast."""
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    index = pd.DatetimeIndex(values.index)
    good = np.isfinite(numbers.to_numpy()) & (numbers.to_numpy() >= 0) & (index == index.floor("h"))
    bad = ~good & values.notna().to_numpy()
    if bad.any():
        log.warning(
            "%s %s: %d unusable values left out (first: %s at %s)",
            live.source.name,
            live.zone,
            int(bad.sum()),
            values[bad].iloc[0],
            index[bad][0].isoformat(),
        )
    return numbers[good]


def _store_down(exc: DatabaseUnavailable) -> ProviderUnavailable:
    return ProviderUnavailable(f"observation store: {exc}")


@dataclass
class LiveIntensity:
    """History from the observation store, extended from each region's live source."""

    store: ObservationStore
    sources: Mapping[str, LiveSource]
    fallback: IntensityProvider | None = None
    name: str = "live"
    _asked: dict[tuple[str, Signal], set[pd.Timestamp]] = field(default_factory=dict)

    def regions(self) -> list[str]:
        fallback = self.fallback.regions() if self.fallback is not None else []
        return sorted({*self.sources, *fallback})

    def source_of(self, region: str) -> tuple[str, Signal]:
        """The name of the source that feeds ``region`` and the kind of intensity it gives."""
        live = self.sources.get(region)
        if live is not None:
            return live.source.name, live.signal
        if self.fallback is not None:
            return self.fallback.source_of(region)
        raise ProviderUnavailable(f"no intensity source for region {region!r}")

    async def history(self, region: str, issue: datetime, hours: int) -> pd.Series:
        live = self.sources.get(region)
        if live is None:
            if self.fallback is None:
                raise ProviderUnavailable(f"no intensity source for region {region!r}")
            return await self.fallback.history(region, issue, hours)
        end = pd.Timestamp(issue).tz_convert("UTC")
        start = end - pd.Timedelta(hours=hours)
        try:
            await self.store.ready()
            await self.extend(live, start, end)
            stored = await self.store.observed(
                live.zone, live.signal, start, end, factors=live.factors
            )
        except DatabaseUnavailable as exc:
            raise _store_down(exc) from exc
        return stored.reindex(hours_between(start, end)).rename(region)

    async def extend(self, live: LiveSource, start: datetime, end: datetime) -> Upserted:
        """Fetch and store the hours of ``[start, end)`` the store lacks (see the module doc)."""
        key = (live.zone, live.signal)
        have = (
            await self.store.observed(live.zone, live.signal, start, end, factors=live.factors)
        ).index
        missing = hours_between(start, end).difference(have)
        asked = self._asked.setdefault(key, set())
        recent = pd.Timestamp(end) - pd.Timedelta(hours=RECENT_RETRY_H)
        todo = pd.DatetimeIndex([h for h in missing if h >= recent or h not in asked])
        done = Upserted()
        for window_start, window_end in runs(todo, merge_gap_h=MERGE_GAP_H):
            values = usable(live, await live.source.observed(live.zone, window_start, window_end))
            done = done + await self.store.upsert(
                live.zone, live.signal, live.source.name, values, factors=live.factors
            )
            asked.update(hours_between(window_start, window_end))
        self._asked[key] = {h for h in asked if h >= pd.Timestamp(start)}
        if done.new or done.changed:
            log.info(
                "%s %s: %d hours stored, %d revised, from %s",
                live.zone,
                live.signal,
                done.new,
                done.changed,
                live.source.name,
            )
        return done

    async def provider_forecast(self, region: str, issue: datetime, hours: int) -> pd.Series | None:
        """The source's own forecast for ``region`` from ``issue`` (None: it has none, or it
        failed: the model's forecast then stands alone, logged)."""
        live = self.sources.get(region)
        if live is None:
            return None
        try:
            return await live.source.forecast(live.zone, issue, hours)
        except ProviderUnavailable as exc:
            log.warning("%s: the provider's own forecast is unavailable: %s", region, exc)
            return None


@dataclass(frozen=True)
class BackfillReport:
    """What a backfill did over its window of ``hours`` hours."""

    zone: str
    source: str
    hours: int
    stored_before: int
    stored: Upserted
    lacking: int  # hours of the window the provider has no value for

    @property
    def complete(self) -> bool:
        return self.lacking == 0


async def backfill(
    store: ObservationStore,
    live: LiveSource,
    start: datetime,
    end: datetime,
    progress: Callable[[int, int], None] | None = None,
    window_h: int = BACKFILL_WINDOW_H,
) -> BackfillReport:
    """Store the observed hours of ``[start, end)`` the store lacks, ``window_h`` hours per
    request; ``progress(done, total)`` after each window (hours). Resumable: a run cut short
    keeps every window it finished, and the next run skips them."""
    await store.ready()
    window = hours_between(start, end)
    have = (await store.observed(live.zone, live.signal, start, end, factors=live.factors)).index
    missing = window.difference(have)
    done_hours, stored = 0, Upserted()
    if progress is not None:
        progress(0, len(missing))
    for window_start, window_end in runs(missing, merge_gap_h=0, max_len_h=window_h):
        values = usable(live, await live.source.observed(live.zone, window_start, window_end))
        stored = stored + await store.upsert(
            live.zone, live.signal, live.source.name, values, factors=live.factors
        )
        done_hours += (window_end - window_start) // pd.Timedelta(hours=1)
        if progress is not None:
            progress(done_hours, len(missing))
    after = await store.observed(live.zone, live.signal, start, end, factors=live.factors)
    return BackfillReport(
        zone=live.zone,
        source=live.source.name,
        hours=len(window),
        stored_before=len(have),
        stored=stored,
        lacking=len(window) - len(after),
    )
