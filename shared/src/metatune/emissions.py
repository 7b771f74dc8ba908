"""The emissions basis every view uses: the dashboard, the CLI (``results``, ``study show``, the
demo's closing table), the report and the model card compute their grams here and nowhere else.

* **The forecast price of an hour** is the forecast's expected intensity (0.3 p10 + 0.4 median +
  0.3 p90, :func:`metatune.contracts.forecasts.expected_intensity`): what the scheduler's plan
  minimises and the agent charges.
* **An hour as run**: its IT energy x its datacenter's PUE x an intensity. The agent charges each
  hour at the latest forecast's price while it runs (``as charged``); once its grid region has
  observed the hour, the hour is priced at the observed intensity instead (``as run``: realised
  where observed, the forecast's otherwise). An hour with neither is unpriced: None, never 0, and
  so is any total that includes it.
* **Run now at home**, the counterfactual every saving is measured against: the trial's *measured*
  energy, hour by hour, run without a break at its home datacenter from the clock hour it was
  requested, each hour at the home's PUE and the price of the forecast in force at the request
  (the latest issue at or before it; an hour only a later issue covers, at that issue's). Pricing
  an estimate instead (the request's rated power x its estimated hours) overstates a CPU run by two
  orders of magnitude, which is why no view does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from .contracts.forecasts import expected_intensity

HOUR = timedelta(hours=1)

PricedBy = Literal["realised", "forecast", "unpriced"]


def grams(energy_wh: float, pue: float, g_per_kwh: float | None) -> float | None:
    """gCO2eq of ``energy_wh`` of IT energy at ``pue`` and ``g_per_kwh`` (None: unpriced)."""
    return None if g_per_kwh is None else energy_wh / 1000.0 * pue * g_per_kwh


def as_run(
    energy_wh: float, pue: float, forecast_g_per_kwh: float | None, realised_g_per_kwh: float | None
) -> tuple[float | None, PricedBy]:
    """An hour's gCO2eq as run, and what priced it: its observed intensity where the grid has
    observed it, else the forecast's the agent charged, else nothing."""
    if realised_g_per_kwh is not None:
        return grams(energy_wh, pue, realised_g_per_kwh), "realised"
    if forecast_g_per_kwh is not None:
        return grams(energy_wh, pue, forecast_g_per_kwh), "forecast"
    return None, "unpriced"


def total(values: Iterable[float | None]) -> float | None:
    """The sum, or None as soon as one value is unknown."""
    out = 0.0
    for value in values:
        if value is None:
            return None
        out += value
    return out


def floor_hour(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)


def energy_profile(hours: Iterable[tuple[datetime, float]]) -> list[tuple[datetime, float]]:
    """A run's IT energy per clock hour, in order (an hour of a migration summed over its sites)."""
    energy: dict[datetime, float] = defaultdict(float)
    for hour, wh in hours:
        energy[hour] += wh
    return sorted(energy.items())


def forecast_price(p10: float, median: float, p90: float) -> float:
    """An hour's forecast price, g/kWh: the expected intensity of its percentiles."""
    return float(expected_intensity(p10, median, p90))


class ForecastsInForce:
    """The forecast price per region and hour as known at a moment: the latest issue at or before
    it, else the first issue after it (only a later one covered the hour)."""

    def __init__(self, rows: Iterable[tuple[str, datetime, datetime, float, float, float]]) -> None:
        """``rows``: (region, hour, issued at, p10, median, p90 g/kWh)."""
        self.points: dict[tuple[str, datetime], list[tuple[datetime, float]]] = defaultdict(list)
        for region, hour, issued_at, p10, median, p90 in rows:
            self.points[(region, hour)].append((issued_at, forecast_price(p10, median, p90)))
        for issues in self.points.values():
            issues.sort()

    def at(self, region: str, hour: datetime, known_at: datetime) -> float | None:
        issues = self.points.get((region, hour), [])
        earlier = [g for issued, g in issues if issued <= known_at]
        if earlier:
            return earlier[-1]
        return issues[0][1] if issues else None


@dataclass(frozen=True)
class Counterfactual:
    """A measured energy profile priced at a site from an hour on: its hours and grams (None and
    why where an hour has no forecast)."""

    hours: list[datetime] = field(default_factory=list)
    grams: float | None = None
    missing: str | None = None


def priced_at(
    profile: list[tuple[datetime, float]],
    start: datetime,
    known_at: datetime,
    region: str,
    pue: float,
    forecasts: ForecastsInForce,
) -> Counterfactual:
    """``profile`` (:func:`energy_profile`) run without a break at a site of ``region`` and
    ``pue`` from the clock hour ``start``, at the forecast in force at ``known_at``."""
    first = floor_hour(start)
    hours = [first + k * HOUR for k in range(len(profile))]
    out = 0.0
    absent = []
    for hour, (_, wh) in zip(hours, profile, strict=True):
        g = forecasts.at(region, hour, known_at)
        if g is None:
            absent.append(hour)
        else:
            out += wh / 1000.0 * pue * g
    if absent:
        why = (
            f"{len(absent)} of {len(hours)} hour(s) without a forecast, "
            f"first {absent[0]:%Y-%m-%d %H:%M}"
        )
        return Counterfactual(hours, None, why)
    return Counterfactual(hours, out)


def run_now_at_home(
    profile: list[tuple[datetime, float]],
    requested_at: datetime,
    region: str,
    pue: float,
    forecasts: ForecastsInForce,
) -> Counterfactual:
    """The run-now-at-home counterfactual (see the module's docstring)."""
    if not profile:
        return Counterfactual(missing="no energy metered yet")
    return priced_at(profile, requested_at, requested_at, region, pue, forecasts)
