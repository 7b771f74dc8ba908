"""WattTime (API v3): the *marginal* CO2 emission rate (MOER) of a grid region.

Documentation: https://docs.watttime.org. ``GET /login`` with HTTP basic auth answers
``{"token": ...}``, a bearer token valid for 30 minutes; ``GET /v3/historical`` (``region``,
``start``, ``end``, ``signal_type``) and ``GET /v3/forecast`` (``region``, ``signal_type``,
``horizon_hours``) answer ``{"data": [{"point_time", "value"}, ...], "meta": {"units":
"lbs_co2_per_mwh", "data_point_period_seconds": 300, ...}}``. We ask for ``co2_moer``.

A marginal rate is not an average intensity: this source says ``signal = marginal`` so a forecast
built on it carries that label and never mixes with average figures. Values are converted from
lbs CO2/MWh to gCO2/kWh (x 0.453592) and the 5-minute points averaged per UTC hour. The token is
renewed ``renew_margin_s`` before its 30 minutes run out, and once more if the API refuses it
anyway; history is read in pages of ``page_days``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import httpx
import pandas as pd
from pydantic import SecretStr

from ..domain.hourly import (
    Point,
    hourly_means,
    lbs_per_mwh_to_g_per_kwh,
    paged_hours,
    utc_hour,
)
from ..domain.providers import EmissionFactors, ProviderUnavailable, Signal, SourceMisconfigured
from .provider_http import ProviderHttp, iso_z

DEFAULT_URL = "https://api.watttime.org"
SIGNAL_TYPE = "co2_moer"
UNITS = "lbs_co2_per_mwh"
TOKEN_TTL_S = 1800.0
CREDENTIAL_SETTINGS = "METATUNE_WATTTIME_USERNAME / METATUNE_WATTTIME_PASSWORD_FILE"
MAX_FORECAST_HOURS = 72


class WattTimeSource:
    name = "watttime"
    signal = Signal.marginal
    factors = EmissionFactors.direct  # a marginal *operating* emissions rate: combustion only

    def __init__(
        self,
        username: str,
        password: SecretStr,
        http: ProviderHttp,
        *,
        page_days: int = 30,
        token_ttl_s: float = TOKEN_TTL_S,
        renew_margin_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._auth = httpx.BasicAuth(username, password.get_secret_value())
        self.http = http
        self.page_days = page_days
        self.token_ttl_s = token_ttl_s
        self.renew_margin_s = renew_margin_s
        self.clock = clock
        self.logins = 0
        self._token: SecretStr | None = None
        self._renew_at = 0.0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"WattTimeSource({self.http!r})"

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _login(self) -> None:
        payload = await self.http.get_json("/login", auth=self._auth, setting=CREDENTIAL_SETTINGS)
        token = payload.get("token") if isinstance(payload, dict) else None
        if not isinstance(token, str) or not token:
            raise ProviderUnavailable("WattTime /login answered without a token")
        self._token = SecretStr(token)
        self._renew_at = self.clock() + self.token_ttl_s - self.renew_margin_s
        self.logins += 1

    async def _headers(self) -> Mapping[str, str]:
        async with self._lock:
            if self._token is None or self.clock() >= self._renew_at:
                await self._login()
            assert self._token is not None
            return {"Authorization": f"Bearer {self._token.get_secret_value()}"}

    async def _get(self, path: str, params: dict[str, str | int]) -> Any:
        try:
            return await self.http.get_json(path, params, headers=self._headers)
        except SourceMisconfigured:
            async with self._lock:  # refused before its time: log in once more, then give up
                self._token = None
            return await self.http.get_json(path, params, headers=self._headers)

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        async def page(page_start: pd.Timestamp, page_end: pd.Timestamp) -> Iterable[Point]:
            payload = await self._get(
                "/v3/historical",
                {
                    "region": zone,
                    "start": iso_z(page_start),
                    "end": iso_z(page_end),
                    "signal_type": SIGNAL_TYPE,
                },
            )
            return _points(payload)

        return await paged_hours(start, end, pd.Timedelta(days=self.page_days), page)

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        payload = await self._get(
            "/v3/forecast",
            {
                "region": zone,
                "signal_type": SIGNAL_TYPE,
                "horizon_hours": min(hours, MAX_FORECAST_HOURS),
            },
        )
        first = utc_hour(issue)
        series = hourly_means(_points(payload), first, first + pd.Timedelta(hours=hours))
        return series if len(series) else None


def _points(payload: Any) -> list[tuple[str, float | None]]:
    """``(point_time, gCO2/kWh)`` of each data point, after checking the units."""
    try:
        units = payload["meta"]["units"]
        rows = payload["data"]
        if units != UNITS:
            raise ProviderUnavailable(f"WattTime sent units {units!r}, expected {UNITS!r}")
        return [
            (
                row["point_time"],
                None if row.get("value") is None else lbs_per_mwh_to_g_per_kwh(row["value"]),
            )
            for row in rows
        ]
    except (KeyError, TypeError) as exc:
        raise ProviderUnavailable(
            f"WattTime response without the expected data and meta ({exc!r})"
        ) from exc
