"""The MILP itself: a hand-checked optimum, the two builders agree, migration only when it pays."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings

from metatune_scheduler.domain import (
    Aggregation,
    HighsModelSolver,
    Planner,
    SiteSnapshot,
    pulp_builder,
)
from metatune_scheduler.domain.instance import Instance
from metatune_scheduler.domain.model import objective_of
from metatune_scheduler.domain.planner import JobSnapshot, MigrationPolicy

from .conftest import job_id
from .instances import EXACT, hand_instance, instances


def test_hand_checked_optimum_with_both_builders() -> None:
    instance = hand_instance()
    fast = HighsModelSolver(EXACT).solve(instance)
    readable = pulp_builder.solve(instance, gap=0.0)
    assert fast.objective == readable.objective == 240
    hours = fast.hours(instance.shape)
    assert hours[0, 0, 2] == hours[0, 0, 3] == 1  # the 2 kW job gets A's clean hours
    assert hours[1, 1].sum() == 2 and hours[1, 0].sum() == 0
    assert hours[2, 0, :2].sum() == 1
    assert objective_of(instance, hours) == 240


@settings(max_examples=25, deadline=None)
@given(instances())
def test_builders_reach_the_same_optimum(instance: Instance) -> None:
    fast = HighsModelSolver(EXACT).solve(instance)
    readable = pulp_builder.solve(instance, gap=0.0)
    assert np.isclose(fast.objective, readable.objective, rtol=1e-7, atol=1e-6)
    # and what the model promises holds in the fast builder's answer (for the integer jobs:
    # anticipated ones are fluid and their rounded hours need not add up)
    hours = fast.hours(instance.shape) * instance.integral()[:, None, None]
    assert (hours <= instance.usable).all()
    assert (hours.sum(axis=(1, 2)) + fast.unmet == instance.need)[instance.integral()].all()
    assert ((hours.sum(axis=2) > 0).sum(axis=1) <= 1).all()  # one site per job
    gpu_hours = np.einsum("j,jdt->dt", instance.gpus, hours)
    assert (gpu_hours <= instance.capacity * instance.periods.length + 1e-9).all()


def paused_job(hours: int) -> JobSnapshot:
    return JobSnapshot(
        job_id=job_id(1),
        need_hours=hours,
        gpus=1,
        power_kw=1.0,
        deadline_hour=24,
        allowed=frozenset({"a", "b"}),
        home="a",
        location="a",
    )


def flat(name: str, value: float) -> SiteSnapshot:
    return SiteSnapshot(name=name, pue=1.0, gpus=4, intensity=np.full(168, value))


def test_migrates_only_when_it_pays() -> None:
    policy = MigrationPolicy(delay_hours=1, transfer_kwh=0.5, restart_hours=0.1)  # 0.6 kWh per move
    planner = Planner(HighsModelSolver(EXACT), Aggregation.none(24), policy)
    # B saves 2 h * 5 g = 10 g but moving there costs 0.6 kWh * 95 g = 57 g: stay at A
    stay = planner.plan(0, [paused_job(2)], [flat("a", 100), flat("b", 95)])
    assert {dc for _, dc, _ in stay.jobs[job_id(1)].slots} == {"a"}
    # B saves 2 h * 90 g = 180 g for 0.6 kWh * 10 g = 6 g: move, and not before the transfer is done
    move = planner.plan(0, [paused_job(2)], [flat("a", 100), flat("b", 10)])
    slots = move.jobs[job_id(1)].slots
    assert {dc for _, dc, _ in slots} == {"b"} and min(h for h, _, _ in slots) >= policy.delay_hours


def test_of_two_nearly_equal_hours_the_earlier_is_taken() -> None:
    """The delay premium: deferring work must pay more than ``delay_premium`` per hour waited."""
    job = dataclasses.replace(paused_job(1), location=None)
    intensity = np.full(168, 30.0)
    intensity[0], intensity[12] = 20.0, 19.5  # 12 h later is 0.5 g cleaner: less than 12 h x 0.1 g

    def hour_taken(planner: Planner, later: float) -> tuple[int, float]:
        intensity[12] = later
        plan = planner.plan(
            0, [job], [SiteSnapshot(name="a", pue=1.0, gpus=4, intensity=intensity.copy())]
        )
        ((hour, _, grams),) = plan.jobs[job_id(1)].slots
        return hour, grams

    premium = Planner(HighsModelSolver(EXACT), Aggregation.none(24), delay_premium=0.1)
    assert hour_taken(premium, 19.5) == (0, 20.0)  # now; emissions reported from the forecast alone
    assert hour_taken(premium, 10.0) == (12, 10.0)  # a real saving still waits
    assert hour_taken(
        Planner(HighsModelSolver(EXACT), Aggregation.none(24), delay_premium=0.0), 19.5
    ) == (12, 19.5)


def test_a_move_planned_an_hour_ago_is_not_delayed_again() -> None:
    """The transfer delay is sat out once: re-planning every hour must not push the move back."""
    planner = Planner(HighsModelSolver(EXACT), Aggregation.none(24), MigrationPolicy(delay_hours=1))
    sites = [flat("a", 100), flat("b", 10)]
    job = dataclasses.replace(paused_job(3), deadline_hour=4)  # 1 h slack: exactly the transfer
    first = planner.plan(0, [job], sites)
    assert [(h, dc) for h, dc, _ in first.jobs[job_id(1)].slots] == [(1, "b"), (2, "b"), (3, "b")]
    # an hour later the checkpoint is still at A (the job did not run); the move still holds
    again = planner.plan(1, [job], sites, previous=first)
    assert [(h, dc) for h, dc, _ in again.jobs[job_id(1)].slots] == [(1, "b"), (2, "b"), (3, "b")]
    assert not again.infeasible


@settings(max_examples=25, deadline=None)
@given(instances())
def test_the_lagrangian_bound_lies_between_the_lp_bound_and_the_optimum(instance: Instance) -> None:
    """domain/bounds.py: a valid lower bound (never above the MILP optimum), and from the LP's
    capacity duals never below the LP bound (one site per job only makes each job dearer)."""
    import highspy

    from metatune_scheduler.domain.bounds import lagrangian_bound, lagrangian_value
    from metatune_scheduler.domain.highs_builder import solve_relaxation

    instance = dataclasses.replace(instance, optional=None)  # the bound assumes integer jobs
    optimum = HighsModelSolver(EXACT).solve(instance).objective
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    relaxation = solve_relaxation(highs, instance)
    scale = 1e-6 * max(abs(optimum), 1.0)
    assert lagrangian_value(instance, relaxation.capacity_price)[0] >= relaxation.objective - scale
    bound = lagrangian_bound(instance, relaxation.capacity_price, optimum, iterations=40)
    assert relaxation.objective - scale <= bound.value <= optimum + scale
    # any prices give a lower bound, not only good ones
    assert lagrangian_value(instance, np.full(instance.capacity.shape, 50.0))[0] <= optimum + scale
