"""Interval recalibration from the model's own recent forecasts: what it may look at, and which way it moves."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from metatune_forecaster.domain.recent import (
    BACKTEST_STRIDE_H,
    BLEND_SHRINK,
    MIN_RECENT_ROWS,
    RECENT_WINDOW_H,
    SHRINK,
    PastForecasts,
    Recalibration,
    past_issues,
    width_needed,
)

ISSUE = 5000


def past(
    error_scale: float,
    rng: np.random.Generator,
    issues: np.ndarray | None = None,
    base_offset: float = 0.3,
) -> PastForecasts:
    """Past forecasts whose static interval is [mid - 0.1, mid + 0.1], whose errors are normal with
    sd ``error_scale`` (0.1 / 1.2816 gives exactly 80 % coverage) and whose 7-day mean is off by
    ``base_offset``."""
    issues = past_issues(ISSUE) if issues is None else issues
    issue = np.repeat(issues, 168)
    lead = np.tile(np.arange(1, 169), len(issues))
    mid = np.ones(len(issue))
    actual = mid + rng.normal(0.0, error_scale, len(issue))
    return PastForecasts(issue, lead, mid - 0.1, mid, mid + 0.1, mid + base_offset, actual)


def test_only_hours_observed_before_the_issue_are_scored() -> None:
    forecasts = past(
        0.05,
        np.random.default_rng(0),
        np.array([ISSUE - RECENT_WINDOW_H - 1, ISSUE - 100, ISSUE - 25, ISSUE, ISSUE + 5]),
    )
    actual = forecasts.actual.copy()
    actual[168 + 3] = np.nan  # lead 4 of ISSUE - 100 was never observed
    forecasts = replace(forecasts, actual=actual)
    scored = forecasts.scored_before(ISSUE)
    assert set(scored.issue) == {ISSUE - 100, ISSUE - 25}
    assert np.all(scored.issue + scored.lead - 1 < ISSUE) and np.all(np.isfinite(scored.actual))
    assert len(scored.issue) == 100 + 25 - 1
    assert (
        np.all(np.diff(past_issues(ISSUE)) == -BACKTEST_STRIDE_H)
        and past_issues(ISSUE).min() >= ISSUE - RECENT_WINDOW_H
    )


def test_intervals_widen_after_misses_and_narrow_after_too_easy_hits() -> None:
    rng = np.random.default_rng(1)
    calibrated = Recalibration.learn(past(0.1 / 1.2816, rng).scored_before(ISSUE)).widths
    wild = Recalibration.learn(past(0.2 / 1.2816, rng).scored_before(ISSUE)).widths
    calm = Recalibration.learn(past(0.05 / 1.2816, rng).scored_before(ISSUE)).widths
    assert np.allclose(calibrated[:2], 1.0, atol=0.05)  # blocks 1-24 and 25-96 h are fully scored
    assert np.all(wild[:2] > 1.3) and np.all(calm[:2] < 0.85)
    # shrunk towards 1: twice the error scales the offsets by about 1 + SHRINK, not 2
    assert np.allclose(wild[:2], 1 + SHRINK, atol=0.1)


def test_too_few_scored_hours_leave_the_forecast_alone() -> None:
    few = Recalibration.learn(
        past(0.5, np.random.default_rng(2), np.array([ISSUE - MIN_RECENT_ROWS // 2])).scored_before(
            ISSUE
        )
    )
    assert np.array_equal(few.widths, np.ones(3)) and np.array_equal(few.weights, np.ones(3))


def test_median_leans_halfway_to_the_7_day_mean_only_where_that_mean_did_better() -> None:
    rng = np.random.default_rng(3)
    # the trees are right on average, the 7-day mean 0.3 too high: keep the trees
    assert np.array_equal(
        Recalibration.learn(past(0.05, rng).scored_before(ISSUE)).weights[:2], [1.0, 1.0]
    )
    # the 7-day mean was exact and the trees 0.3 too low: go halfway towards the mean
    forecasts = past(0.0, rng, base_offset=0.0)
    forecasts = replace(
        forecasts, mid=forecasts.mid - 0.3, low=forecasts.low - 0.3, high=forecasts.high - 0.3
    )
    leaning = Recalibration.learn(forecasts.scored_before(ISSUE))
    assert np.allclose(leaning.weights[:2], 1 - BLEND_SHRINK)
    low, mid, high = leaning.apply(
        np.array([0.6]), np.array([0.7]), np.array([0.8]), np.array([1.0]), np.array([5])
    )
    assert (
        np.isclose(mid[0], 0.7 * (1 - BLEND_SHRINK) + 1.0 * BLEND_SHRINK)
        and low[0] <= mid[0] <= high[0]
    )


def test_recalibrated_interval_scales_offsets_per_block_and_keeps_the_median_inside() -> None:
    lead = np.array([1, 30, 100, 168])
    mid = np.array([1.0, 1.0, 0.2, 1.0])
    low, high = mid - 0.1, mid + 0.2
    recalibration = Recalibration(np.ones(3), np.array([1.0, 0.5, 3.0]))
    new_low, new_mid, new_high = recalibration.apply(low, mid, high, np.full(4, np.nan), lead)
    assert np.array_equal(new_mid, mid)
    assert np.allclose(new_low, [0.9, 0.95, 0.0, 0.7]) and np.allclose(
        new_high, [1.2, 1.1, 0.8, 1.6]
    )
    assert np.all(new_low <= mid) and np.all(mid <= new_high) and np.all(new_low >= 0)


def test_width_is_two_sided_so_a_one_sided_spell_widens_both_offsets() -> None:
    # the last four weeks' errors were all above the median (a level shift), twice the nominal size
    forecasts = past(
        0.0, np.random.default_rng(4), base_offset=0.0
    )  # no blend: the errors stay as drawn
    errors = np.abs(np.random.default_rng(5).normal(0.0, 0.2 / 1.2816, len(forecasts.actual)))
    forecasts = replace(forecasts, actual=forecasts.mid + errors)
    widths = Recalibration.learn(forecasts.scored_before(ISSUE)).widths
    # 80 % of |N(0, 0.2 / 1.2816)| lie within 0.2 / 1.2816 * 1.2816 = 2 x the offset 0.1: the factor
    # 2 shrunk to 1 + SHRINK, on both sides (per-side factors would have collapsed the lower offset)
    assert np.allclose(widths[:2], 1 + SHRINK, atol=0.1)
    band = (np.array([0.9]), np.array([1.0]), np.array([1.1]))
    low, mid, high = Recalibration(np.ones(3), widths).apply(*band, np.array([1.0]), np.array([5]))
    assert np.isclose(mid[0] - low[0], high[0] - mid[0]) and mid[0] - low[0] > 0.1


def test_width_needed_is_the_nominal_quantile_of_what_each_hour_needed() -> None:
    below, above = np.full(5, -0.1), np.full(5, 0.2)
    error = np.array([-0.05, -0.2, 0.1, 0.4, 0.0])  # needs 0.5, 2, 0.5, 2, 0
    assert np.isclose(
        width_needed(error, below, above), np.quantile([0.5, 2.0, 0.5, 2.0, 0.0], 0.8)
    )
    # errors inside the offsets need less than 1, errors twice outside need 2
    assert width_needed(np.array([0.05, -0.05]), below[:2], above[:2]) < 1.0
