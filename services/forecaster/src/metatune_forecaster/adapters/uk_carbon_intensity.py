"""The GB Carbon Intensity API (NESO / National Grid ESO): free, no key, half-hourly.

Documentation: https://carbon-intensity.github.io/api-definitions/ . National:
``GET /intensity/{from}/{to}`` answers ``{"data": [{"from", "to", "intensity": {"forecast",
"actual", "index"}}]}``; regional: ``GET /regional/intensity/{from}/{to}/regionid/{id}`` answers
``{"data": {"regionid", "shortname", "data": [{"from", "to", "intensity": {"forecast",
"index"}, "generationmix"}]}}`` (region ids 1-17, e.g. 13 London; the regional series has no
``actual``: its ``forecast`` is the API's only regional estimate). Forecasts: ``/intensity/
{from}/fw48h`` and ``/regional/intensity/{from}/fw48h/regionid/{id}``. Times are written
``YYYY-MM-DDThh:mmZ``; a range may span at most 14 days, so longer windows are paged. The
forecast is read only with ``METATUNE_UK_CARBON_INTENSITY_FORECAST`` on (the default).

The zone id is ``national`` (or ``GB``) or a region id. Every half-hour is placed by its own
``from`` converted to UTC, and each UTC hour is the mean of its two half-hours: the API's
settlement periods follow UK local time (a 46- or 50-period day at a clock change), which
therefore neither doubles nor drops an hour here. Average intensity (generation-based, the
API's methodology), gCO2/kWh, from direct (operational) factors: its methodology's factor table
gives wind, solar, hydro and nuclear 0 g/kWh; no response states it, so it is the source's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import pandas as pd

from ..domain.hourly import Point, hourly_means, paged_hours, utc_hour
from ..domain.providers import EmissionFactors, ProviderUnavailable, Signal, SourceMisconfigured
from .provider_http import ProviderHttp

DEFAULT_URL = "https://api.carbonintensity.org.uk"
PAGE_DAYS = 14
NATIONAL = {"national", "gb"}


def _stamp(moment: pd.Timestamp) -> str:
    return moment.strftime("%Y-%m-%dT%H:%MZ")


class UkCarbonIntensitySource:
    name = "uk-carbon-intensity"
    signal = Signal.average
    factors = EmissionFactors.direct

    def __init__(
        self, http: ProviderHttp, *, page_days: int = PAGE_DAYS, forecast: bool = True
    ) -> None:
        self.http = http
        self.page_days = page_days
        self.forecast_enabled = forecast  # METATUNE_UK_CARBON_INTENSITY_FORECAST

    def __repr__(self) -> str:
        return f"UkCarbonIntensitySource({self.http!r})"

    async def aclose(self) -> None:
        await self.http.aclose()

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        path, field = _route(zone)

        async def page(page_start: pd.Timestamp, page_end: pd.Timestamp) -> Iterable[Point]:
            payload = await self.http.get_json(path(f"{_stamp(page_start)}/{_stamp(page_end)}"))
            return _points(payload, field)

        return await paged_hours(start, end, pd.Timedelta(days=self.page_days), page)

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        if not self.forecast_enabled:
            return None
        path, _ = _route(zone)
        first = utc_hour(issue)
        payload = await self.http.get_json(path(f"{_stamp(first)}/fw48h"))
        series = hourly_means(
            _points(payload, "forecast"), first, first + pd.Timedelta(hours=hours)
        )
        return series if len(series) else None


def _route(zone: str) -> tuple[Callable[[str], str], str]:
    """The path builder for ``zone`` and the field that holds its observed value."""
    key = zone.strip().lower()
    if key in NATIONAL:
        return (lambda span: f"/intensity/{span}"), "actual"
    if key.isdigit() and 1 <= int(key) <= 17:
        return (lambda span: f"/regional/intensity/{span}/regionid/{int(key)}"), "forecast"
    raise SourceMisconfigured(
        f"uk-carbon-intensity zone {zone!r} is neither 'national' nor a region id 1-17: "
        "fix intensity_zone in the datacenter registry"
    )


def _points(payload: Any, field: str) -> list[tuple[str, float | None]]:
    """``(from, intensity[field])`` of each half-hour, national or regional layout."""
    try:
        rows = payload["data"]
        if isinstance(rows, dict):  # regional: one region's block
            rows = rows["data"]
        elif rows and isinstance(rows[0], dict) and "regionid" in rows[0]:
            rows = rows[0]["data"]
        return [(row["from"], row["intensity"].get(field)) for row in rows]
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ProviderUnavailable(
            f"Carbon Intensity API response without the expected half-hours ({exc!r})"
        ) from exc
