"""The one resampling step every intensity source ends with (domain/hourly.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from metatune_forecaster.domain.hourly import hourly_means, lbs_per_mwh_to_g_per_kwh, pages, within


def test_local_times_around_a_clock_change_land_on_their_utc_hours() -> None:
    # 25 Oct 2020, UK clocks back at 02:00 BST: local 01:30 happens twice, an hour apart
    points = [
        ("2020-10-25T00:30:00+01:00", 100.0),  # 23:30 UTC on the 24th
        ("2020-10-25T01:00:00+01:00", 110.0),  # 00:00 UTC
        ("2020-10-25T01:30:00+01:00", 120.0),  # 00:30 UTC, first 01:30
        ("2020-10-25T01:00:00+00:00", 130.0),  # 01:00 UTC, second 01:00
        ("2020-10-25T01:30:00+00:00", 140.0),  # 01:30 UTC, second 01:30
        ("2020-10-25T02:00:00Z", None),  # no value: a gap, not a zero
    ]
    series = hourly_means(points)
    assert list(series.index) == list(
        pd.date_range("2020-10-24T23:00Z", "2020-10-25T01:00Z", freq="h")
    )
    assert list(series) == [100.0, 115.0, 135.0] and str(series.index.tz) == "UTC"


def test_naive_times_are_utc_and_bounds_cut_the_window() -> None:
    points = [(f"2023-03-26T0{h}:00:00", float(h)) for h in range(6)]
    series = hourly_means(
        points, datetime(2023, 3, 26, 1, 30, tzinfo=UTC), datetime(2023, 3, 26, 4, tzinfo=UTC)
    )
    assert list(series) == [1.0, 2.0, 3.0]  # the hour 01:00 holds 01:30


def test_pages_and_what_each_keeps() -> None:
    start, end = datetime(2023, 1, 1, tzinfo=UTC), datetime(2023, 1, 2, 1, tzinfo=UTC)
    assert [(a.hour, b.hour) for a, b in pages(start, end, pd.Timedelta(hours=10))] == [
        (0, 10),
        (10, 20),
        (20, 1),
    ]
    edge = [("2023-01-01T00:00:00Z", 1.0), ("2023-01-01T10:00:00Z", 2.0)]
    assert within(edge, start, datetime(2023, 1, 1, 10, tzinfo=UTC)) == edge[:1]


def test_lbs_per_mwh_in_grams_per_kwh() -> None:
    assert lbs_per_mwh_to_g_per_kwh(1000.0) == pytest.approx(453.592)
