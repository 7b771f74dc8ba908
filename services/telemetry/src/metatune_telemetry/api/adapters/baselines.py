"""Read side of the run-now-at-home baseline: a trial's metered energy priced at its home
datacenter from the hour it was requested, by :func:`metatune.emissions.run_now_at_home` (the one
rule every view uses), with the forecasts the database holds for those hours."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from metatune.emissions import HOUR, ForecastsInForce, energy_profile, floor_hour, run_now_at_home

from ...adapters.db import Database
from ...disclosure.adapters.queries import Sites
from ..domain.views import Baseline

POINTS = """
SELECT hour, issued_at, p10_g_per_kwh, g_per_kwh, p90_g_per_kwh FROM forecast_points
WHERE region = %(region)s AND hour = ANY(%(hours)s)
"""


async def run_now(
    db: Database,
    sites: Sites,
    home: str | None,
    requested_at: datetime | None,
    hours: Iterable[Mapping[str, Any]],
) -> Baseline:
    """The baseline of a trial requested at ``requested_at`` from ``home`` whose metered job-hours
    (rows with ``hour`` and ``energy_wh``, IT energy) are ``hours``."""
    if home is None or requested_at is None:
        return Baseline(datacenter=home, hours=[], kgco2eq=None, missing="no job request recorded")
    region, pue = sites.region_of.get(home), sites.pue_of.get(home)
    if region is None or pue is None:
        return Baseline(
            datacenter=home, hours=[], kgco2eq=None, missing=f"grid region or PUE of {home} unknown"
        )
    profile = energy_profile((h["hour"], float(h["energy_wh"])) for h in hours)
    first = floor_hour(requested_at)
    wanted = [first + k * HOUR for k in range(len(profile))]
    rows = await db.fetch(POINTS, {"region": region, "hours": wanted}) if wanted else []
    forecasts = ForecastsInForce((region, *row) for row in rows)
    priced = run_now_at_home(profile, requested_at, region, pue, forecasts)
    return Baseline(
        datacenter=home,
        hours=priced.hours,
        kgco2eq=None if priced.grams is None else priced.grams / 1000,
        missing=priced.missing,
    )
