"""Emissions realised (:func:`metatune.emissions.as_run`): each hour a run's grid region has since observed, priced at its observed
(average, location-based) intensity, read from the observed hours the forecasts carry; the hours
not observed yet keep the forecast price the agent charged, and are counted as such."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from nats.js import JetStreamContext

from metatune import subjects
from metatune.contracts import CarbonForecast, Event, RunAccounting
from metatune.emissions import as_run, total

from .eventlog import events_of

Observed = dict[tuple[str, datetime], tuple[datetime, float]]  # (region, hour) -> (issued, g/kWh)


async def load_observed(js: JetStreamContext, stream: str, regions: set[str]) -> Observed:
    """The observed intensity of each region-hour the forecasts of ``regions`` carry, the latest
    issue's report of an hour winning."""
    if not regions:
        return {}
    wanted: dict[str, type[Event]] = {
        subjects.forecasts(region): CarbonForecast for region in sorted(regions)
    }
    out: Observed = {}
    for event in await events_of(js, stream, wanted):
        if not isinstance(event, CarbonForecast) or event.observed is None:
            continue
        if event.observed.signal != "average":
            continue  # a marginal signal is no location-based price
        for h in event.observed.hours:
            key = (event.region, h.hour)
            if key not in out or out[key][0] <= event.issued_at:
                out[key] = (event.issued_at, h.g_per_kwh)
    return out


def realised(
    accounting: RunAccounting | None,
    region_of: dict[str, str],
    observed: Observed,
    datacenter: str | None,
) -> dict[str, Any]:
    """The run's emissions with each observed hour at its realised intensity (the others at the
    forecast's); None where an hour has neither."""
    if accounting is None:
        return {"realised_emissions_g": None, "realised_hours": None, "forecast_priced_hours": None}
    priced = []
    for h in accounting.hours:
        region = region_of.get(h.datacenter or datacenter or "")
        found = observed.get((region, h.hour)) if region else None
        priced.append(as_run(h.energy_wh, h.pue, h.g_per_kwh, None if found is None else found[1]))
    by = [how for _, how in priced]
    return {
        "realised_emissions_g": total(g for g, _ in priced),
        "realised_hours": by.count("realised"),
        "forecast_priced_hours": by.count("forecast"),
    }
