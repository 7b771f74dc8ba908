"""A job announced ahead (``earliest_start``) never runs before it, and its known demand keeps clean room."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from metatune.contracts import JobRequested
from metatune.registry import Registry
from metatune_scheduler.domain import HighsModelSolver, Planner, Scheduler, SolveLimits
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested, with_agents


def _scheduler() -> Scheduler:
    registry = Registry(
        datacenters=[
            dc.model_copy(update={"gpus": 1}) if dc.name == "osl1" else dc
            for dc in small_registry("fra1", "osl1").datacenters
        ]
    )
    return with_agents(
        Scheduler(
            registry, Planner(HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0)))
        )
    )


def test_an_announced_job_never_runs_before_its_start() -> None:
    """Oslo is cleanest now, but the job may only start in 30 min: it gets the next whole hour."""
    announced = job_requested(2, hours=1, deadline_h=5).model_copy(
        update={"earliest_start": NOW + timedelta(minutes=30)}
    )
    scheduler = _scheduler()
    for event in [forecast("NO", [5.0] + [10.0] * 167), forecast("DE", [400.0]), announced]:
        scheduler.apply(event)
    (entry,) = scheduler.replan(NOW).plan.entries
    assert (entry.datacenter, entry.hours) == ("osl1", [NOW + timedelta(hours=1)])
    assert list(scheduler.replan(NOW).assignments) == []  # nothing to start this hour


def test_an_announced_job_waits_for_its_start_and_its_room_is_kept() -> None:
    """Oslo has one GPU, a little dirtier now (20 g) than later (10 g). A flexible 1 h job alone
    waits for the cleaner next hour; with a 2 h job announced to start then (30 min from now, so
    from the next whole hour) and due in 3 h, the flexible job runs now and the announced one
    gets Oslo's next two hours, none before its start."""
    flexible = job_requested(1, hours=1, deadline_h=3)
    announced = job_requested(2, hours=2, deadline_h=3).model_copy(
        update={"earliest_start": NOW + timedelta(minutes=30)}
    )
    grids = [forecast("NO", [20.0] + [10.0] * 167), forecast("DE", [400.0])]
    firsts = {}
    for events in ([flexible], [flexible, announced]):
        scheduler = _scheduler()
        for event in [*grids, *events]:
            scheduler.apply(event)
        plan = scheduler.replan(NOW).plan
        firsts[len(events)] = {
            entry.job_id: (entry.datacenter, entry.hours) for entry in plan.entries
        }
    assert firsts[1] == {job_id(1): ("osl1", [NOW + timedelta(hours=1)])}
    assert firsts[2] == {
        job_id(1): ("osl1", [NOW]),
        job_id(2): ("osl1", [NOW + timedelta(hours=1), NOW + timedelta(hours=2)]),
    }


def test_an_earliest_start_at_or_after_the_deadline_is_refused() -> None:
    request = job_requested(1, hours=1, deadline_h=4)
    with pytest.raises(ValidationError, match="earliest_start must be before the deadline"):
        JobRequested.model_validate({**request.model_dump(), "earliest_start": request.deadline})
