"""Stale and short-history forecasts: the plan widens their interval (``domain/uncertainty.py``)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from metatune.contracts import CarbonForecast, RegionGroup
from metatune_scheduler.domain import HighsModelSolver, Planner, Scheduler, SolveLimits
from metatune_scheduler.domain.horizon import epoch_hour
from metatune_scheduler.domain.uncertainty import (
    REPEATED_DAY_WIDTHS,
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
    (PUE 1.25) a flat 30.2 g/kWh: 37.75 g/kWh at the meter, against Oslo's 1.1 x 33.5 = 36.85 fresh."""
    sched = with_agents(
        Scheduler(
            REGISTRY, Planner(HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0)))
        )
    )
    for event in (
        clean,
        forecast("DE", [30.2]),
        job_requested(1, hours=2, home="osl1", group=RegionGroup.EU),
    ):
        sched.apply(event)
    (entry,) = sched.replan(NOW).plan.entries
    return entry.datacenter


def test_a_fresh_forecast_of_the_cleaner_grid_wins() -> None:
    assert planned_at(oslo()) == "osl1"


def test_a_stale_forecast_still_inside_its_horizon_is_taken_as_it_is() -> None:
    """Two hours old, only the last two hours of the week are repeated: the day the job can run
    in keeps the bands the forecaster made for its true lead."""
    assert planned_at(oslo(age_h=2)) == "osl1"


def test_the_older_the_stale_forecast_the_less_the_cleaner_grid_is_preferred() -> None:
    """170 h after its issue the job's day is 1 day past the horizon, widened by 1.051: 0.3 x 4.24
    + 0.4 x 20 + 0.3 x 83.06 = 34.19 g/kWh, x 1.1 = 37.6, still under 37.75. 218 h after, it is 3
    days past, widened by 1.12: 0.3 x 3.2 + 0.4 x 20 + 0.3 x 87.2 = 35.1, x 1.1 = 38.6: Frankfurt."""
    assert planned_at(oslo(age_h=170)) == "osl1"
    assert planned_at(oslo(age_h=218)) == "fra1"


def test_a_short_history_forecast_of_the_cleaner_grid_loses_to_a_sure_one() -> None:
    """Widened by 1.19: 0.3 x 2.15 + 0.4 x 20 + 0.3 x 91.4 = 36.1 g/kWh, x 1.1 = 39.7 > 37.75."""
    assert planned_at(oslo(short_history=True)) == "fra1"


def test_the_widened_hours_are_those_past_the_issue_horizon_by_days_past() -> None:
    one, two, more = REPEATED_DAY_WIDTHS
    assert (interval_widths(oslo(), HOUR, 168) == 1.0).all()
    day_old = interval_widths(oslo(age_h=24), HOUR, 168)  # leads 25-192
    assert (day_old[:144] == 1.0).all() and (day_old[144:] == one).all()
    older = interval_widths(oslo(age_h=100), HOUR, 168)  # leads 101-268
    assert older[67] == 1.0 and older[68] == one and older[91] == one  # leads 168, 169, 192
    assert older[92] == two and older[115] == two and (older[116:] == more).all()  # 193, 216, 217+
    assert (interval_widths(oslo(age_h=300), HOUR, 168) == more).all()


def test_the_plan_hour_ages_a_forecast_too() -> None:
    """A fresh forecast the scheduler still holds a day later: its last day is repeated."""
    widths = interval_widths(oslo(), HOUR + 24, 168)
    assert (widths[:144] == 1.0).all() and (widths[144:] == REPEATED_DAY_WIDTHS[0]).all()


def test_both_flags_multiply() -> None:
    widths = interval_widths(oslo(age_h=400, short_history=True), HOUR, 48)
    assert widths == pytest.approx(np.full(48, REPEATED_DAY_WIDTHS[-1] * SHORT_HISTORY_WIDTH))


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
    near_zero = oslo(age_h=400, short_history=True).model_copy(
        update={"p10_g_per_kwh": [2.0] * 168}
    )
    low, _, high = planning_bands(near_zero, HOUR, 24)
    k = REPEATED_DAY_WIDTHS[-1] * SHORT_HISTORY_WIDTH
    assert (low == 0.0).all()  # 20 - 1.33 x 18 < 0
    assert high == pytest.approx(np.full(24, 20 + 60 * k))
