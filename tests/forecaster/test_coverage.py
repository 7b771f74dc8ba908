"""The interval's coverage by lead bucket: counted per bucket, pooled over regions before the share."""

from __future__ import annotations

import numpy as np

from metatune_forecaster.domain.evaluation import COVERAGE_LEADS, coverage_hits


def test_hits_are_counted_per_lead_bucket() -> None:
    lead = np.array([1, 24, 25, 72, 73, 168])
    low = np.full(6, 10.0)
    high = np.full(6, 20.0)
    actual = np.array([15.0, 25.0, 10.0, 20.0, 9.9, 20.1])  # in, out, both edges in, both out
    hits = coverage_hits(lead, low, high, actual)
    assert [lo for lo, _ in COVERAGE_LEADS] == [1, 25, 73]
    assert hits.tolist() == [[1, 2], [2, 2], [0, 2]]


def test_hours_without_an_actual_or_a_band_are_not_scored() -> None:
    lead = np.array([1, 2, 3, 100])
    low = np.array([0.0, np.nan, 0.0, 0.0])
    high = np.array([1.0, 1.0, 1.0, 1.0])
    actual = np.array([0.5, 0.5, np.nan, 0.5])
    assert coverage_hits(lead, low, high, actual).tolist() == [[1, 1], [0, 0], [1, 1]]
