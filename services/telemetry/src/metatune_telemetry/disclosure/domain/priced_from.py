"""Which stored forecast hour priced a job-hour, and whether that forecast was stale or short of
history (pure: no database).

The agent charges an hour at the price (:func:`metatune.emissions.forecast_price`) of the latest
forecast issue it holds while the hour runs. Of the stored hours of the job-hour's region and hour
(``forecast_points``, one per issue), the one that priced it is the latest issue whose price is
the price charged. A stale forecast (the last good one shifted, its ``issued_at`` kept) repeats
the hours of its issue, so the stored hour carries the flags of every forecast that carried it
(``telemetry_0011``). No stored hour with that price (a forecast telemetry never received): no
flags known, the hour is not listed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from metatune.emissions import forecast_price

ForecastFlag = Literal["stale", "short_history"]


@dataclass(frozen=True, slots=True)
class ForecastHour:
    """One stored forecast hour of a region: its issue, bands and the flags of its forecasts."""

    issued_at: datetime
    p10: float
    median: float
    p90: float
    stale: bool
    short_history: bool

    @property
    def flags(self) -> list[ForecastFlag]:
        flags: list[ForecastFlag] = []
        if self.stale:
            flags.append("stale")
        if self.short_history:
            flags.append("short_history")
        return flags


def pricing_forecast(charged: float | None, stored: Iterable[ForecastHour]) -> ForecastHour | None:
    """The stored hour whose price is ``charged`` (g/kWh), the latest issue of those; None when
    the hour was not charged or no stored hour has that price."""
    if charged is None:
        return None
    matches = [
        point
        for point in stored
        if math.isclose(
            forecast_price(point.p10, point.median, point.p90), charged, rel_tol=1e-9, abs_tol=1e-9
        )
    ]
    return max(matches, key=lambda point: point.issued_at, default=None)
