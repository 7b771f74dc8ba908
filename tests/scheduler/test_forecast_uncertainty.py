"""Stale and short-history forecasts: the plan widens their interval (``domain/uncertainty.py``)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from metatune.contracts import CarbonForecast, RegionGroup
from metatune_scheduler.domain import HighsModelSolver, Planner, Scheduler, SolveLimits
from metatune_scheduler.domain.horizon import epoch_hour
from metatune_scheduler.domain.uncertainty import (
    REPEATED_HOUR_WIDTH,
    SHORT_HISTORY_WIDTH,
    interval_widths,
    planned_intensity,
    planning_bands,
)
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_requested, with_agents

HOUR = epoch_hour(NOW)
REGISTRY = small_registry("fra1", "osl1")


def oslo(*, age_h: int = 0, short_history: bool = False) -> CarbonForecast:
    """A clean grid with upward spikes (p10 5, median 20, p90 80 g/kWh: expected 33.5), issued
    ``age_h`` hours before its start (a stale one, shifted by the forecaster, keeps its issue)."""
    fresh = forecast("NO", [20.0])
    return fresh.model_copy(
        update={
            "p10_g_per_kwh": [5.0] * 168,
            "p90_g_per_kwh": [80.0] * 168,
            "issued_at": NOW - timedelta(hours=age_h),
            "stale": age_h > 0,
            "short_history": short_history,
        }
    )


def planned_at(clean: CarbonForecast) -> str:
    """Where a 2-hour job due in a day runs, Oslo's grid (PUE 1.1) as ``clean``, Frankfurt's
    (PUE 1.25) a flat 30.5 g/kWh: 38.1 g/kWh at the meter, against Oslo's 1.1 x 33.5 = 36.9 fresh."""
    sched = with_agents(
        Scheduler(
            REGISTRY, Planner(HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0)))
        )
    )
    for event in (
        clean,
        forecast("DE", [30.5]),
        job_requested(1, hours=2, home="osl1", group=RegionGroup.EU),
    ):
        sched.apply(event)
    (entry,) = sched.replan(NOW).plan.entries
    return entry.datacenter


def test_a_fresh_forecast_of_the_cleaner_grid_wins() -> None:
    assert planned_at(oslo()) == "osl1"


def test_a_week_old_stale_forecast_of_the_cleaner_grid_loses_to_a_sure_one() -> None:
    """170 h after its issue every hour of Oslo's forecast is a repeated day: widened by 1.27 its
    expected value is 0.3 x 0.95 + 0.4 x 20 + 0.3 x 96.2 = 37.1 g/kWh, x 1.1 = 40.8 > 38.1."""
    assert planned_at(oslo(age_h=170)) == "fra1"


def test_a_stale_forecast_still_inside_its_horizon_is_taken_as_it_is() -> None:
    """Two hours old, only the last two hours of the week are repeated: the day the job can run
    in keeps the bands the forecaster made for its true lead."""
    assert planned_at(oslo(age_h=2)) == "osl1"


def test_a_short_history_forecast_of_the_cleaner_grid_loses_to_a_sure_one() -> None:
    """Widened by 1.19: 0.3 x 2.15 + 0.4 x 20 + 0.3 x 91.4 = 36.1 g/kWh, x 1.1 = 39.7 > 38.1."""
    assert planned_at(oslo(short_history=True)) == "fra1"


@pytest.mark.parametrize("age_h", [0, 1, 24, 100, 167, 168, 300])
def test_the_widened_hours_are_those_past_the_issue_horizon(age_h: int) -> None:
    widths = interval_widths(oslo(age_h=age_h), HOUR, 168)
    repeated = min(age_h, 168)
    assert (widths[: 168 - repeated] == 1.0).all()
    assert (widths[168 - repeated :] == REPEATED_HOUR_WIDTH).all()


def test_the_plan_hour_ages_a_forecast_too() -> None:
    """A fresh forecast the scheduler still holds a day later: its last day is repeated."""
    widths = interval_widths(oslo(), HOUR + 24, 168)
    assert (widths[:144] == 1.0).all() and (widths[144:] == REPEATED_HOUR_WIDTH).all()


def test_both_flags_multiply() -> None:
    widths = interval_widths(oslo(age_h=200, short_history=True), HOUR, 48)
    assert widths == pytest.approx(np.full(48, REPEATED_HOUR_WIDTH * SHORT_HISTORY_WIDTH))


def test_widening_keeps_the_median_and_a_symmetric_expected_value() -> None:
    """A symmetric interval far from 0 widened has the same mean: only skew or the floor at 0
    moves the expected intensity (a risk-neutral plan on a wider but centred forecast)."""
    centred = forecast("DE", [300.0]).model_copy(
        update={
            "p10_g_per_kwh": [250.0] * 168,
            "p90_g_per_kwh": [350.0] * 168,
            "short_history": True,
        }
    )
    low, mid, high = planning_bands(centred, HOUR, 24)
    assert (mid == 300.0).all()
    assert low == pytest.approx(np.full(24, 300 - 50 * SHORT_HISTORY_WIDTH))
    assert high == pytest.approx(np.full(24, 300 + 50 * SHORT_HISTORY_WIDTH))
    assert planned_intensity(centred, HOUR, 24) == pytest.approx(np.full(24, 300.0))


def test_the_lower_bound_stops_at_zero() -> None:
    low, _, high = planning_bands(oslo(age_h=400, short_history=True), HOUR, 24)
    k = REPEATED_HOUR_WIDTH * SHORT_HISTORY_WIDTH
    assert (low == 0.0).all()  # 20 - 1.51 x 15 < 0
    assert high == pytest.approx(np.full(24, 20 + 60 * k))
