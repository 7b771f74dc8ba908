"""Observed hourly intensity as the observation store keeps it, and which hours to fetch.

Pure: the store (``adapters/store.py``) and the live provider (``adapters/live.py``) use these to
put a provider's answer in one shape and to ask the provider only for the hours they lack.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd

HOUR = pd.Timedelta(hours=1)


def hourly(values: pd.Series) -> pd.Series:
    """``values`` as the store keeps them: a float Series on a sorted, tz-aware UTC hourly index,
    one value per hour (the last of duplicates), missing (NaN) hours dropped.

    Raises ValueError, naming the first offending hour, on a naive timestamp, a time not on the
    hour, or an intensity that is not a finite number >= 0."""
    index = pd.DatetimeIndex(values.index)
    if len(index) and index.tz is None:
        raise ValueError("observed hours must be timezone-aware (UTC)")
    numbers = pd.to_numeric(pd.Series(values.to_numpy()), errors="coerce").to_numpy(dtype=float)
    series = pd.Series(numbers, index=index.tz_convert("UTC") if len(index) else index)
    unreadable = values.notna().to_numpy() & np.isnan(numbers)
    bad = unreadable | np.isinf(numbers) | (numbers < 0)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raw = values.iloc[first]
        shown = repr(float(raw)) if isinstance(raw, int | float | np.number) else repr(raw)
        raise ValueError(
            f"intensity must be a finite number >= 0 gCO2eq/kWh, not {shown} at "
            f"{series.index[first].isoformat()}"
        )
    series = series[~series.index.duplicated(keep="last")].sort_index().dropna()
    off_hour = series.index[series.index != series.index.floor("h")]
    if len(off_hour):
        raise ValueError(f"observed hours must start on the hour, not {off_hour[0].isoformat()}")
    return series.astype(float)


def hours_between(start: datetime, end: datetime) -> pd.DatetimeIndex:
    """The hours of ``[start, end)``, UTC."""
    return pd.date_range(
        pd.Timestamp(start).tz_convert("UTC"),
        pd.Timestamp(end).tz_convert("UTC"),
        freq="h",
        inclusive="left",
    )


def runs(
    hours: pd.DatetimeIndex, merge_gap_h: int = 0, max_len_h: int | None = None
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """``hours`` as ``[start, end)`` windows: consecutive hours together, windows at most
    ``merge_gap_h`` hours apart merged (one request instead of many), none longer than
    ``max_len_h`` hours (split, so a long backfill advances and resumes window by window)."""
    windows: list[tuple[pd.Timestamp, pd.Timestamp]] = []
    for hour in hours.sort_values():
        if windows and hour - windows[-1][1] <= merge_gap_h * HOUR:
            windows[-1] = (windows[-1][0], hour + HOUR)
        else:
            windows.append((hour, hour + HOUR))
    if max_len_h is None:
        return windows
    split: list[tuple[pd.Timestamp, pd.Timestamp]] = []
    for start, end in windows:
        while end - start > max_len_h * HOUR:
            split.append((start, start + max_len_h * HOUR))
            start = start + max_len_h * HOUR
        split.append((start, end))
    return split
