"""The forecaster benchmark reports the interval's coverage by lead bucket, all regions' hours pooled."""

from __future__ import annotations

import numpy as np

from .conftest import load_bench

bench = load_bench("forecaster_bench")


def _hits(inside: list[int], scored: list[int]) -> np.ndarray:
    return np.array(list(zip(inside, scored, strict=True)))


def test_coverage_pools_hours_not_shares() -> None:
    hits = {
        "EM:A": {
            "model": _hits([90, 0, 0], [100, 10, 0]),
            "static": _hits([50, 5, 0], [100, 10, 0]),
        },
        "EM:B": {
            "model": _hits([2, 80, 3], [10, 100, 4]),
            "static": _hits([10, 60, 4], [10, 100, 4]),
        },
    }
    by_lead = bench.coverage_by_lead(hits)
    assert list(by_lead) == ["1-24", "25-72", "73-168"]
    day = by_lead["1-24"]
    # 92 of 110 hours, not the mean of 90 % and 20 %
    assert day["coverage"] == 100 * 92 / 110 and day["hours"] == 110
    assert (day["coverage_min"], day["coverage_max"]) == (20.0, 90.0)
    assert day["coverage_regions_within"] == 0 and day["within"] is True
    two_days = by_lead["25-72"]  # B at 80 %, A at 0 %: 80 of 110 hours
    assert two_days["coverage_regions_within"] == 1 and two_days["within"] is False
    week = by_lead["73-168"]  # a region with no hours there is left out of min / max
    assert week["hours"] == 4 and week["coverage_min"] == week["coverage_max"] == 75.0
    assert week["static_coverage"] == 100.0 and week["within"] is True
