"""The plan's grams on the meter's basis: a job's IT energy (the request's estimate, then the
energy per step its agent metered) x PUE x the forecast intensity of the hours it is planned in,
whatever the clock; never its power for every whole clock hour it holds."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from metatune.contracts import (
    AssignmentAction,
    Event,
    Plan,
    RegionGroup,
    RunAccounting,
    RunProgress,
)
from metatune_scheduler.domain import Pace, Planner, Scheduler
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested, with_agents

REGISTRY = small_registry("fra1")
PUE = REGISTRY.get("fra1").pue
G_PER_KWH = 200.0  # flat: every hour prices alike


def scheduler(hour_wall_s: float = 3600.0) -> Scheduler:
    sched = with_agents(Scheduler(REGISTRY, Planner(), pace=Pace(hour_wall_s=hour_wall_s)))
    sched.apply(forecast("DE", [G_PER_KWH]))
    return sched


def step(sched: Scheduler, now: datetime) -> list[Event]:
    events = sched.replan(now).events()
    for event in events:
        sched.apply(event)
    return events


def head(events: list[Event]) -> Plan:
    return next(e for e in events if isinstance(e, Plan))


def request(hours: float = 1.5, power_kw: float = 2.0) -> Event:
    return job_requested(1, hours=hours, power_kw=power_kw, home="fra1", group=RegionGroup.EU)


def test_the_plan_prices_the_estimated_energy_not_whole_clock_hours() -> None:
    """1.5 GPU-hours at 2 kW hold 2 clock hours; the plan expects 3 kWh, not 4."""
    sched = scheduler()
    sched.apply(request())
    plan = head(step(sched, NOW))
    assert plan.expected_emissions_g == pytest.approx(1.5 * 2.0 * PUE * G_PER_KWH)
    assert plan.baseline_emissions_g == pytest.approx(1.5 * 2.0 * PUE * G_PER_KWH)
    assert sum(len(e.hours) for e in plan.entries) == 2
    assert sum(e.emissions_g for e in plan.entries) == pytest.approx(plan.expected_emissions_g)


def test_a_simulated_clock_changes_the_hours_not_the_energy() -> None:
    """36 real seconds per simulated hour: the same plan, the same grams (the agent meters the
    energy the work takes, not a share of the clock's hours)."""
    plans = []
    for sched in (scheduler(), scheduler(hour_wall_s=36.0)):
        sched.apply(request())
        plans.append(head(step(sched, NOW)))
    real, simulated = plans
    assert simulated.expected_emissions_g == pytest.approx(real.expected_emissions_g)
    assert simulated.baseline_emissions_g == pytest.approx(real.baseline_emissions_g)
    assert [(e.datacenter, e.hours, e.emissions_g) for e in simulated.entries] == [
        (e.datacenter, e.hours, pytest.approx(e.emissions_g)) for e in real.entries
    ]


def progress(energy_wh: float) -> RunProgress:
    """Step 10 of 40, ``energy_wh`` metered so far (0: nothing metered yet)."""
    return RunProgress(
        occurred_at=NOW + timedelta(minutes=30),
        job_id=job_id(1),
        datacenter="fra1",
        step=10,
        total_steps=40,
        power_w=40.0,
        steps_per_hour=20.0,
        accounting=RunAccounting(energy_wh=energy_wh),
    )


def test_once_the_agent_reports_the_plan_prices_the_metered_energy_per_step() -> None:
    """10 of 40 steps for 5 Wh: the 30 steps left are expected to draw 15 Wh, whatever the
    request estimated (3 kWh here: a GPU estimate for a run that turned out small)."""
    sched = scheduler()
    sched.apply(request())
    first = step(sched, NOW)
    assert [e.action for e in first if hasattr(e, "action")] == [AssignmentAction.start]
    sched.apply(progress(5.0))
    plan = head(step(sched, NOW + timedelta(hours=1)))
    assert plan.expected_emissions_g == pytest.approx(0.015 * PUE * G_PER_KWH)
    assert plan.baseline_emissions_g == pytest.approx(0.015 * PUE * G_PER_KWH)


def test_before_a_metered_step_the_estimate_is_shared_by_the_steps_left() -> None:
    """A report without energy yet: a quarter of the steps done, three quarters of the request's
    energy left."""
    sched = scheduler()
    sched.apply(request())
    step(sched, NOW)
    sched.apply(progress(0.0))
    plan = head(step(sched, NOW + timedelta(hours=1)))
    assert plan.expected_emissions_g == pytest.approx(0.75 * 3.0 * PUE * G_PER_KWH)
