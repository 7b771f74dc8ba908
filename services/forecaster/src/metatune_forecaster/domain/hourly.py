"""Provider points (5-minute, half-hourly, hourly; any offset; repeats) as one value per UTC hour.

Every intensity source ends with the same step, so the rules live once: timestamps are converted
to UTC before anything else (a local-time or DST quirk upstream cannot shift or double an hour),
each point counts for the hour it starts in, the hour's value is the mean of its points (a
repeated hour, a half-hour pair and twelve 5-minute points are all resolved the same way), null
values are dropped rather than read as zero, and hours without a point stay absent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

import numpy as np
import pandas as pd

LBS_PER_MWH_IN_G_PER_KWH = 0.453592  # 1 lb = 453.592 g, 1 MWh = 1000 kWh

Point = tuple[str | datetime, float | None]  # a provider's timestamp and value (None: no value)


def utc(moment: datetime | str) -> pd.Timestamp:
    """``moment`` (aware with any offset, or naive meaning UTC) as a UTC timestamp."""
    stamp = pd.Timestamp(moment)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def utc_hour(moment: datetime | str) -> pd.Timestamp:
    """``moment`` as a UTC timestamp floored to its hour."""
    return utc(moment).floor("h")


def hourly_means(
    points: Iterable[Point],
    start: datetime | None = None,
    end: datetime | None = None,
) -> pd.Series:
    """The mean of the points of each UTC hour in ``[start, end)`` (either bound optional): a
    float Series on a sorted, unique, tz-aware UTC index; null or non-finite values ignored."""
    times: list[pd.Timestamp] = []
    values: list[float] = []
    for moment, value in points:
        if value is None:
            continue
        number = float(value)
        if np.isfinite(number):
            times.append(utc_hour(moment))
            values.append(number)
    series = pd.Series(values, index=pd.DatetimeIndex(times, tz="UTC"), dtype=float)
    series = series.groupby(level=0).mean().sort_index()
    if start is not None:
        series = series[series.index >= utc_hour(start)]
    if end is not None:
        series = series[series.index < utc(end)]
    series.index = pd.DatetimeIndex(series.index, tz="UTC", freq=None)
    return series.rename("intensity")


def pages(
    start: datetime, end: datetime, length: pd.Timedelta
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """``[start, end)`` cut into consecutive ``[from, to)`` ranges of at most ``length`` (the
    longest range a provider answers in one request), in order."""
    bounds, page_start, stop = [], utc(start), utc(end)
    while page_start < stop:
        page_end = min(page_start + length, stop)
        bounds.append((page_start, page_end))
        page_start = page_end
    return bounds


def within(points: Iterable[Point], start: datetime, end: datetime) -> list[Point]:
    """The points stamped in ``[start, end)``: what one page keeps, since a provider may answer
    a range with the point at either end too, which the next page answers again."""
    first, stop = utc(start), utc(end)
    return [point for point in points if first <= utc(point[0]) < stop]


async def paged_hours(
    start: datetime,
    end: datetime,
    length: pd.Timedelta,
    page: Callable[[pd.Timestamp, pd.Timestamp], Awaitable[Iterable[Point]]],
) -> pd.Series:
    """The hourly means over ``[start, end)`` of what ``page`` answers for each ``[from, to)`` of
    at most ``length`` (:func:`pages`), each page keeping its own points (:func:`within`)."""
    first, stop = utc_hour(start), utc(end)
    points: list[Point] = []
    for page_start, page_end in pages(first, stop, length):
        points += within(await page(page_start, page_end), page_start, page_end)
    return hourly_means(points, first, stop)


def lbs_per_mwh_to_g_per_kwh(value: float) -> float:
    """A rate in lbs CO2 per MWh (WattTime's unit) in gCO2 per kWh."""
    return value * LBS_PER_MWH_IN_G_PER_KWH
