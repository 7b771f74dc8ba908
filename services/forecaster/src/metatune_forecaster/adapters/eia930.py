"""EIA-930 (U.S. EIA Hourly Electric Grid Monitor): free, a key, every U.S. balancing authority.

Documentation: https://www.eia.gov/opendata/documentation.php (API v2; a free key from
https://www.eia.gov/opendata/register.php, sent as the ``api_key`` query parameter, the only way
the API takes it). ``GET /v2/electricity/rto/fuel-type-data/data/`` with ``frequency=hourly``,
``data[0]=value``, ``facets[respondent][]=<BA>`` (e.g. ``CISO``, ``ERCO``, ``PJM``, ``MISO``),
``start`` / ``end`` (``YYYY-MM-DDTHH``, UTC, both included), ``offset`` / ``length`` (at most 5,000
rows a request) answers ``{"response": {"total", "data": [{"period", "respondent", "fueltype",
"type-name", "value", "value-units": "megawatthours"}]}}``: net generation by energy source, one
row per hour and source, ``value`` a string, a number or null. An hourly ``period`` names the
hour's *end* (EIA-930 reports hour-ending data), so the hour starting at ``t`` is ``period t+1``.

Each hour's mix becomes an average, *life-cycle* intensity through the factor table of
:mod:`..domain.generation_mix` (IPCC AR5 medians): ``factors = lifecycle``, so a deployment on
direct factors (the default) refuses this source at start, in one line. Energy sources map onto the
table as :data:`KINDS` says; a code EIA adds later counts as ``other`` (700 g/kWh) and is logged.
EIA publishes no intensity forecast: the model alone forecasts these regions.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import pandas as pd

from ..domain.generation_mix import IPCC_AR5_LIFECYCLE, STORAGE, average_intensity
from ..domain.hourly import Point, paged_hours, utc
from ..domain.providers import EmissionFactors, ProviderUnavailable, Signal
from .provider_http import ProviderHttp

log = logging.getLogger("metatune.forecaster.eia930")

DEFAULT_URL = "https://api.eia.gov"
KEY_SETTING = "METATUNE_EIA_API_KEY_FILE"
PATH = "/v2/electricity/rto/fuel-type-data/data/"
PAGE_HOURS = 7 * 24  # 168 h x at most 16 energy sources: one request of 5,000 rows holds them
ROWS_PER_REQUEST = 5000  # the documented maximum of ``length``

# EIA-930 energy source codes -> the factor table's kinds (codes since 2024Q3 included: solar and
# wind with storage, geothermal, batteries, pumped storage, other and unknown storage)
KINDS: Mapping[str, str] = {
    "COL": "coal",
    "NG": "gas",
    "OIL": "oil",
    "NUC": "nuclear",
    "WAT": "hydro",
    "SUN": "solar",
    "SNB": "solar",
    "WND": "wind",
    "WNB": "wind",
    "GEO": "geothermal",
    "OTH": "other",
    "UNK": "other",
    "BAT": STORAGE,
    "PS": STORAGE,
    "OES": STORAGE,
    "UES": STORAGE,
}


class Eia930Source:
    name = "eia-930"
    signal = Signal.average
    factors = EmissionFactors.lifecycle

    def __init__(
        self,
        http: ProviderHttp,
        *,
        page_hours: int = PAGE_HOURS,
        rows_per_request: int = ROWS_PER_REQUEST,
    ) -> None:
        self.http = http
        self.page_hours = page_hours
        self.rows_per_request = rows_per_request

    def __repr__(self) -> str:
        return f"Eia930Source({self.http!r})"

    async def aclose(self) -> None:
        await self.http.aclose()

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        async def page(page_start: pd.Timestamp, page_end: pd.Timestamp) -> Iterable[Point]:
            return hourly_intensity(await self._rows(zone, page_start, page_end))

        return await paged_hours(start, end, pd.Timedelta(hours=self.page_hours), page)

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        return None

    async def _rows(self, zone: str, start: pd.Timestamp, end: pd.Timestamp) -> list[Any]:
        """Every row of the hours ``[start, end)``, page after page of ``rows_per_request``."""
        rows: list[Any] = []
        while True:
            payload = await self.http.get_json(
                PATH,
                {
                    "frequency": "hourly",
                    "data[0]": "value",
                    "facets[respondent][]": zone,
                    "start": _period(start + pd.Timedelta(hours=1)),
                    "end": _period(end),
                    "sort[0][column]": "period",
                    "sort[0][direction]": "asc",
                    "offset": len(rows),
                    "length": self.rows_per_request,
                },
            )
            page, total = _page(payload)
            rows += page
            if not page or len(rows) >= total:
                return rows


def _period(hour_end: pd.Timestamp) -> str:
    return hour_end.strftime("%Y-%m-%dT%H")


def _page(payload: Any) -> tuple[list[Any], int]:
    """The rows of one response and the total the query has."""
    try:
        response = payload["response"]
        rows = list(response["data"])
        return rows, int(response.get("total", len(rows)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProviderUnavailable(
            f"EIA response without the expected response.data rows ({exc!r})"
        ) from exc


def hourly_intensity(rows: list[Any]) -> list[Point]:
    """``(hour start, gCO2eq/kWh)`` of each hour in ``rows`` (EIA-930 fuel-type records)."""
    mixes: dict[str, dict[str, float | None]] = defaultdict(dict)
    unknown: set[str] = set()
    try:
        for row in rows:
            code = str(row["fueltype"])
            kind = KINDS.get(code, "other")
            if code not in KINDS:
                unknown.add(code)
            mix = mixes[row["period"]]
            value = None if row.get("value") is None else float(row["value"])
            mix[kind] = value if mix.get(kind) is None else (mix[kind] or 0.0) + (value or 0.0)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProviderUnavailable(
            f"EIA fuel-type row without period, fueltype or value ({exc!r})"
        ) from exc
    if unknown:
        log.warning("EIA energy sources not in the factor table, counted as other: %s", unknown)
    return [
        (
            utc(pd.Timestamp(period)) - pd.Timedelta(hours=1),
            average_intensity(mix, IPCC_AR5_LIFECYCLE),
        )
        for period, mix in mixes.items()
    ]
