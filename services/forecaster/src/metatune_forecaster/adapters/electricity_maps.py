"""Electricity Maps (API v3): the average (consumption-based, direct) carbon intensity of a zone.

Documentation: https://portal.electricitymaps.com/docs/getting-started (authentication: an
``auth-token`` header; the free plan has ``/latest`` and ``/history``, the last 24 hours) and
https://portal.electricitymaps.com/developer-hub/api/reference (``/v3/carbon-intensity/past-range``
takes ``zone``, ``start``, ``end`` and answers ``{"zone", "data": [...]}``, at most 10 days (240 h)
of hourly data a request; ``/history`` answers ``{"zone", "history": [...]}``, ``/forecast``
``{"zone", "forecast": [...]}``, ``/latest`` one record). Every record carries ``datetime`` (the
start of the hour, UTC) and ``carbonIntensity`` (gCO2eq/kWh) and says which factors it used (``emissionFactorType``). We ask for
the deployment's factors (``METATUNE_EMISSION_FACTORS``, default ``direct``: those the replay, the
model and ``metatune forecaster import-csv`` use; the API's default is life-cycle) and refuse a
response whose records say otherwise (:func:`~..domain.signals.check_answered_factors`): mixing the
two in one zone's history would bias the forecast by the gap between them, e.g. DE 2023-01-01 00:00
direct 140.5 vs life-cycle 185.8).

A window that lies within the last 24 hours is read from ``/history`` (every plan has it); an
older or longer one from ``/past-range`` in pages of ``page_hours``. The provider's own forecast
is read only where the plan includes it (``METATUNE_ELECTRICITYMAPS_FORECAST``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from pydantic import SecretStr

from ..domain.hourly import Point, hourly_means, paged_hours, utc, utc_hour
from ..domain.providers import EmissionFactors, ProviderUnavailable, Signal
from ..domain.signals import check_answered_factors
from .provider_http import ProviderHttp, iso_z

DEFAULT_URL = "https://api.electricitymaps.com"
PAGE_HOURS = 240  # the documented past-range limit for hourly data
HISTORY_HOURS = 24
TOKEN_SETTING = "METATUNE_ELECTRICITYMAPS_TOKEN_FILE"


class ElectricityMapsSource:
    name = "electricity-maps"
    signal = Signal.average

    def __init__(
        self,
        token: SecretStr,
        http: ProviderHttp,
        *,
        forecast: bool = False,
        factors: EmissionFactors = EmissionFactors.direct,
        page_hours: int = PAGE_HOURS,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._token = token
        self.http = http
        self.forecast_enabled = forecast
        self.factors = factors
        self.page_hours = page_hours
        self.now = now

    def __repr__(self) -> str:
        return f"ElectricityMapsSource({self.http!r})"

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _headers(self) -> Mapping[str, str]:
        return {"auth-token": self._token.get_secret_value()}

    async def _get(self, path: str, params: dict[str, str | int], plan: str = "") -> Any:
        """``plan`` names the endpoint's plan in the 401/403 message (a token may be valid and
        its plan still lack /past-range or /forecast)."""
        params = {**params, "emissionFactorType": self.factors.value}
        setting = TOKEN_SETTING + (f" (and that its plan includes {plan})" if plan else "")
        payload = await self.http.get_json(path, params, headers=self._headers, setting=setting)
        for answered in _factor_types(payload):
            check_answered_factors(f"Electricity Maps ({path})", answered, self.factors)
        return payload

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        first, stop = utc_hour(start), utc(end)
        if first >= utc(self.now()) - timedelta(hours=HISTORY_HOURS):
            payload = await self._get("/v3/carbon-intensity/history", {"zone": zone})
            return hourly_means(_points(payload, "history"), first, stop)

        async def page(page_start: pd.Timestamp, page_end: pd.Timestamp) -> Iterable[Point]:
            payload = await self._get(
                "/v3/carbon-intensity/past-range",
                {"zone": zone, "start": iso_z(page_start), "end": iso_z(page_end)},
                plan="/past-range",
            )
            return _points(payload, "data")

        return await paged_hours(first, stop, pd.Timedelta(hours=self.page_hours), page)

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        if not self.forecast_enabled:
            return None
        payload = await self._get(
            "/v3/carbon-intensity/forecast", {"zone": zone}, plan="/forecast, or unset _FORECAST"
        )
        first = utc_hour(issue)
        series = hourly_means(
            _points(payload, "forecast"), first, first + pd.Timedelta(hours=hours)
        )
        return series if len(series) else None

    async def latest(self, zone: str) -> pd.Series:
        """The latest hour Electricity Maps has for ``zone`` (one value)."""
        payload = await self._get("/v3/carbon-intensity/latest", {"zone": zone})
        return hourly_means(_points({"latest": [payload]}, "latest"))


def _factor_types(payload: Any) -> set[str]:
    """Every ``emissionFactorType`` a response states: at its top level and in each record."""
    if not isinstance(payload, dict):
        return set()
    records = [payload]
    for key in ("history", "data", "forecast"):
        if isinstance(payload.get(key), list):
            records += [r for r in payload[key] if isinstance(r, dict)]
    return {
        str(r["emissionFactorType"]) for r in records if r.get("emissionFactorType") is not None
    }


def _points(payload: Any, key: str) -> list[tuple[str, float | None]]:
    """``(datetime, carbonIntensity)`` of each record under ``payload[key]``."""
    try:
        return [(record["datetime"], record.get("carbonIntensity")) for record in payload[key]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ProviderUnavailable(
            f"Electricity Maps response without the expected {key!r} records ({exc!r})"
        ) from exc
