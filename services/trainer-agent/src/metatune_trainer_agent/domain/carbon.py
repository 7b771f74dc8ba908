"""Carbon accounting: energy per clock hour and site, priced at that hour's forecast intensity.

The intensity is the forecast's expected value (``expected_intensity`` of its 10th, 50th and 90th
percentiles, :mod:`metatune.contracts.forecasts`), the one the scheduler's plan prices hours at, so
the plan's "expected" and the meter's "measured" differ only by forecast revisions and energy.

emissions (gCO2eq) = sum over (hour, datacenter) of energy_wh / 1000 x PUE x g_per_kwh(hour).

Each hour takes the intensity of the latest forecast known while the run spent energy in it;
an hour no forecast covered is kept with ``g_per_kwh = None`` (its energy is reported, its
emissions are not guessed) and is priced as soon as a forecast covering it arrives. The
ledger travels in the checkpoint, so a job that migrates keeps the hours (and the PUE and
region) of every datacenter it ran in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from metatune.clock import HOUR, floor_hour
from metatune.contracts import CarbonForecast, HourlyEnergy
from metatune.contracts.forecasts import expected_intensity

IntensityLookup = Callable[[datetime], float | None]


def no_intensity(hour: datetime) -> float | None:
    return None


class ForecastIntensity:
    """Hourly intensity of one region from the latest forecast that covers the hour.

    A new issue starts at its own hour, while energy is charged when a run reports it: a span that
    crossed the hour is charged after the next issue may have arrived. So the issues before the
    latest are kept (``KEPT``, newest first) and price the hours the latest does not cover, as
    they did when the energy was spent (replaced whole, so safe across threads)."""

    KEPT = 4

    def __init__(self, forecast: CarbonForecast | None = None) -> None:
        self.forecasts: tuple[CarbonForecast, ...] = () if forecast is None else (forecast,)

    @property
    def forecast(self) -> CarbonForecast | None:
        """The latest issue (None before the first)."""
        return self.forecasts[0] if self.forecasts else None

    def update(self, forecast: CarbonForecast) -> None:
        if any(kept.event_id == forecast.event_id for kept in self.forecasts):
            return
        issues = sorted([forecast, *self.forecasts], key=lambda f: f.issued_at, reverse=True)
        self.forecasts = tuple(issues[: self.KEPT])

    def __call__(self, hour: datetime) -> float | None:
        for forecast in self.forecasts:
            index = int((floor_hour(hour) - forecast.start) / HOUR)
            if 0 <= index < len(forecast.g_per_kwh):
                return float(
                    expected_intensity(
                        forecast.p10_g_per_kwh[index],
                        forecast.g_per_kwh[index],
                        forecast.p90_g_per_kwh[index],
                    )
                )
        return None


@dataclass
class _Entry:
    energy_wh: float
    pue: float
    g_per_kwh: float | None


class CarbonLedger:
    """Energy by (clock hour, datacenter) for one run, across pauses and agents."""

    def __init__(self, datacenter: str, pue: float) -> None:
        self.datacenter = datacenter
        self.pue = pue
        self._entries: dict[tuple[datetime, str], _Entry] = {}

    def add(
        self, start: datetime, end: datetime, energy_wh: float, intensity: IntensityLookup
    ) -> None:
        """Charge ``energy_wh`` spent here between ``start`` and ``end``, split across hours by time."""
        if energy_wh <= 0:
            return
        span = (end - start).total_seconds()
        if span <= 0:
            self._charge(floor_hour(end), energy_wh, intensity)
            return
        cursor = start
        while cursor < end:
            hour = floor_hour(cursor)
            stop = min(end, hour + HOUR)
            self._charge(hour, energy_wh * (stop - cursor).total_seconds() / span, intensity)
            cursor = stop

    def _charge(self, hour: datetime, energy_wh: float, intensity: IntensityLookup) -> None:
        entry = self._entries.setdefault((hour, self.datacenter), _Entry(0.0, self.pue, None))
        entry.energy_wh += energy_wh
        if entry.g_per_kwh is None:
            entry.g_per_kwh = intensity(hour)

    def reprice(self, intensity: IntensityLookup) -> None:
        """Fill this datacenter's hours that had no forecast when they were charged."""
        for (hour, site), entry in self._entries.items():
            if site == self.datacenter and entry.g_per_kwh is None:
                entry.g_per_kwh = intensity(hour)

    @property
    def energy_wh(self) -> float:
        return sum(e.energy_wh for e in self._entries.values())

    @property
    def emissions_g(self) -> float:
        return sum(h.emissions_g for h in self.hours())

    def hours(self) -> list[HourlyEnergy]:
        return [
            HourlyEnergy(
                hour=hour,
                datacenter=site,
                pue=entry.pue,
                energy_wh=entry.energy_wh,
                g_per_kwh=entry.g_per_kwh,
                emissions_g=0.0
                if entry.g_per_kwh is None
                else entry.energy_wh / 1000.0 * entry.pue * entry.g_per_kwh,
            )
            for (hour, site), entry in sorted(self._entries.items())
        ]

    def to_state(self) -> list[list[Any]]:
        return [
            [h.isoformat(), site, e.energy_wh, e.pue, e.g_per_kwh]
            for (h, site), e in sorted(self._entries.items())
        ]

    @classmethod
    def from_state(cls, state: list[list[Any]], datacenter: str, pue: float) -> CarbonLedger:
        ledger = cls(datacenter, pue)
        for iso, site, energy, entry_pue, g in state:
            ledger._entries[(datetime.fromisoformat(iso), site)] = _Entry(
                float(energy), float(entry_pue), None if g is None else float(g)
            )
        return ledger
