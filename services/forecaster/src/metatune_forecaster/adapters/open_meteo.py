"""Open-Meteo weather through httpx: timeouts, retries with backoff, and a response cache.

One request per site and issue hour returns the last ``past_days`` days (Open-Meteo's
analysis) and the next ``forecast_days`` days of forecast, which covers both what the features
need from the past and the 168 h horizon. Weather data by Open-Meteo.com (CC BY 4.0).
"""

from __future__ import annotations

import math
import time
from datetime import datetime

import httpx
import numpy as np
import pandas as pd

from metatune.bus.retry import retrying
from metatune.errors import BusUnavailable

from ..domain.providers import ProviderTransient, ProviderUnavailable, Site

DEFAULT_URL = "https://api.open-meteo.com/v1/forecast"
VARIABLES = {
    "temperature_2m": "temperature_c",
    "wind_speed_10m": "wind_ms",
    "cloud_cover": "cloud_pct",
}
RETRYABLE_STATUS = {429, 500, 502, 503, 504}


class OpenMeteoWeather:
    name = "open-meteo"

    def __init__(
        self,
        url: str = DEFAULT_URL,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        cache_ttl_s: float = 3600.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.retries = retries
        self.backoff_s = backoff_s
        self.cache_ttl_s = cache_ttl_s
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), transport=transport)
        self._cache: dict[tuple, tuple[float, pd.DataFrame]] = {}

    async def aclose(self) -> None:
        await self._client.aclose()

    async def hourly(
        self, site: Site, issue: datetime, past_hours: int, future_hours: int
    ) -> pd.DataFrame:
        issue_ts = pd.Timestamp(issue).tz_convert("UTC").floor("h")
        params = {
            "latitude": round(site.latitude, 3),
            "longitude": round(site.longitude, 3),
            "hourly": ",".join(VARIABLES),
            "wind_speed_unit": "ms",
            "timezone": "GMT",
            "past_days": math.ceil(past_hours / 24) + 1,
            "forecast_days": min(math.ceil(future_hours / 24) + 1, 16),
        }
        key = (
            params["latitude"],
            params["longitude"],
            issue_ts,
            params["past_days"],
            params["forecast_days"],
        )
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < self.cache_ttl_s:
            frame = cached[1]
        else:
            frame = parse_hourly(await self._get(params))
            self._cache = {
                k: v for k, v in self._cache.items() if time.monotonic() - v[0] < self.cache_ttl_s
            }
            self._cache[key] = (time.monotonic(), frame)
        index = pd.date_range(
            issue_ts - pd.Timedelta(hours=past_hours), periods=past_hours + future_hours, freq="h"
        )
        return frame.reindex(index)

    async def _get(self, params: dict) -> dict:
        async def attempt() -> dict:
            try:
                response = await self._client.get(self.url, params=params)
            except httpx.HTTPError as exc:  # timeouts, refused connections, protocol errors
                raise ProviderTransient(f"{type(exc).__name__}: {exc}") from exc
            if response.status_code in RETRYABLE_STATUS:
                raise ProviderTransient(f"HTTP {response.status_code}")
            if response.status_code != 200:
                raise ProviderUnavailable(
                    f"Open-Meteo answered HTTP {response.status_code}: {response.text[:200]}"
                )
            try:
                return response.json()
            except ValueError as exc:
                raise ProviderUnavailable(f"Open-Meteo sent invalid JSON: {exc}") from exc

        try:
            return await retrying(
                attempt,
                what="Open-Meteo GET",
                budget_s=math.inf,
                attempts=self.retries + 1,
                initial_s=self.backoff_s,
                max_delay_s=math.inf,
                transient=(ProviderTransient,),
            )
        except BusUnavailable as exc:
            raise ProviderUnavailable(
                f"Open-Meteo did not answer after {self.retries + 1} attempts ({exc.__cause__})"
            ) from exc.__cause__


def parse_hourly(payload: dict) -> pd.DataFrame:
    """Open-Meteo's ``hourly`` block as a UTC-indexed frame of our column names (NaN for nulls)."""
    try:
        hourly = payload["hourly"]
        offset = pd.Timedelta(seconds=payload.get("utc_offset_seconds", 0))
        index = pd.DatetimeIndex(pd.to_datetime(hourly["time"])).tz_localize("UTC") - offset
        columns = {
            ours: np.array(hourly[theirs], dtype=float) for theirs, ours in VARIABLES.items()
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ProviderUnavailable(
            f"Open-Meteo response without the expected hourly data: {exc}"
        ) from exc
    return pd.DataFrame(columns, index=index)
