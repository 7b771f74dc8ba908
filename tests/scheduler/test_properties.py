"""On random instances the plan never breaks a deadline, a capacity or data residency."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metatune_scheduler.domain import (
    Aggregation,
    HighsModelSolver,
    Planner,
    SolveLimits,
)

from .random_plans import FIRST_HOUR, check_plan, scenarios


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.sampled_from([0, 40_000]))
def test_deadlines_capacity_and_residency_hold(scenario, hourly_columns) -> None:
    """``hourly_columns=0`` makes the whole MILP use ``aggregation``'s blocks."""
    jobs, sites, aggregation = scenario
    planner = Planner(
        HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0)),
        aggregation,
        hourly_columns=hourly_columns,
    )
    firm = (
        aggregation if hourly_columns == 0 else Aggregation.none(aggregation.horizon)
    )  # small: hourly
    check_plan(planner.plan(FIRST_HOUR, jobs, sites), jobs, sites, firm)


@settings(max_examples=30, deadline=None)
@given(scenarios())
def test_the_sites_first_path_keeps_the_same_promises(scenario) -> None:
    """``exact_columns=0`` sends every instance down the large-instance path (decomposition.py)."""
    jobs, sites, aggregation = scenario
    planner = Planner(
        HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0)),
        aggregation,
        exact_columns=0,
    )
    check_plan(planner.plan(FIRST_HOUR, jobs, sites), jobs, sites, aggregation)
