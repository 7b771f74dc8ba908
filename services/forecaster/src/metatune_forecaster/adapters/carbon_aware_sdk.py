"""The Green Software Foundation's Carbon Aware SDK WebAPI, for operators who already run it.

Documentation: https://github.com/Green-Software-Foundation/carbon-aware-sdk
(``casdk-docs/docs/tutorial-basics/carbon-aware-webapi.md``). ``GET /emissions/bylocation``
(``location``, ``time``, ``toTime``) answers ``[{"location", "time", "rating", "duration"}]`` with
``rating`` in gCO2/kWh and ``duration`` as ``hh:mm:ss``; ``GET /emissions/forecasts/current``
(``location``, ``dataStartAt``, ``dataEndAt``) answers ``[{"generatedAt", "location",
"forecastData": [{"timestamp", "duration", "value"}], ...}]`` with ``duration`` in minutes.

What the figures measure depends on the data source the SDK is configured with (WattTime:
marginal; Electricity Maps: average), so the signal is a setting
(``METATUNE_CARBON_AWARE_SDK_SIGNAL``), never guessed. A point longer than an hour counts for
every hour it covers. An SDK without a forecast data source answers 404 or 501 to the forecast
endpoint: then there is no provider forecast (None).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from ..domain.hourly import hourly_means, utc, utc_hour
from ..domain.providers import EmissionFactors, ProviderUnavailable, Signal
from .provider_http import ProviderHttp, iso_z

DEFAULT_URL = "http://127.0.0.1:8080"
NO_FORECAST = frozenset({404, 501})


class CarbonAwareSdkSource:
    name = "carbon-aware-sdk"

    def __init__(
        self,
        http: ProviderHttp,
        signal: Signal = Signal.marginal,
        factors: EmissionFactors = EmissionFactors.direct,
    ) -> None:
        self.http = http
        self.signal = signal
        self.factors = factors  # its data source's: the SDK's responses do not say

    def __repr__(self) -> str:
        return f"CarbonAwareSdkSource({self.http!r}, {self.signal.value})"

    async def aclose(self) -> None:
        await self.http.aclose()

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        first, stop = utc_hour(start), utc(end)
        payload = await self.http.get_json(
            "/emissions/bylocation",
            {"location": zone, "time": iso_z(first), "toTime": iso_z(stop)},
        )
        try:
            points = [
                point
                for row in payload
                for point in _spread(row["time"], row.get("rating"), _hms(row.get("duration")))
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderUnavailable(
                f"Carbon Aware SDK emissions without time and rating ({exc!r})"
            ) from exc
        return hourly_means(points, first, stop)

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        first = utc_hour(issue)
        stop = first + pd.Timedelta(hours=hours)
        payload = await self.http.get_json(
            "/emissions/forecasts/current",
            {"location": zone, "dataStartAt": iso_z(first), "dataEndAt": iso_z(stop)},
            absent=NO_FORECAST,
        )
        if payload is None:
            return None
        try:
            points = [
                point
                for forecast in payload
                for row in forecast["forecastData"]
                for point in _spread(
                    row["timestamp"], row.get("value"), timedelta(minutes=row.get("duration") or 0)
                )
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderUnavailable(
                f"Carbon Aware SDK forecast without forecastData ({exc!r})"
            ) from exc
        series = hourly_means(points, first, stop)
        return series if len(series) else None


def _hms(duration: Any) -> timedelta:
    """``hh:mm:ss`` (or ``d.hh:mm:ss``, .NET's TimeSpan) as a timedelta; zero when absent."""
    if not duration:
        return timedelta(0)
    text, days = str(duration), 0
    if "." in text.split(":")[0]:
        head, text = text.split(".", 1)
        days = int(head)
    hours, minutes, seconds = text.split(":")
    return timedelta(days=days, hours=int(hours), minutes=int(minutes), seconds=float(seconds))


def _spread(moment: str, value: Any, duration: timedelta) -> list[tuple[pd.Timestamp, Any]]:
    """The point for its own UTC hour and for every further hour ``duration`` reaches into."""
    begin = utc(moment)
    hour = begin.floor("h")
    points = [(hour, value)]
    while (hour := hour + pd.Timedelta(hours=1)) < begin + duration:
        points.append((hour, value))
    return points
