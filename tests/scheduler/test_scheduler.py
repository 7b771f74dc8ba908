"""The decision step over contracts: assignments, restart from the log, infeasible notices."""

from __future__ import annotations

from datetime import timedelta

from metatune.contracts import AssignmentAction, Event, JobInfeasible, RegionGroup
from metatune_scheduler.domain import HighsModelSolver, Planner, Scheduler, SolveLimits
from metatune_scheduler.domain.horizon import from_epoch_hour
from tests.support.builders import small_registry

from .conftest import NOW, THREE_SITES, forecast, job_requested, three_site_scheduler, with_agents


def inputs() -> list[Event]:
    day = [400.0] * 6 + [80.0] * 12 + [400.0] * 6  # Germany: clean at midday only
    return [
        forecast("DE", day),
        forecast("NO", [30.0]),
        forecast("US-CAL-CISO", [250.0]),
        job_requested(1, hours=3, gpus=4, home="fra1", group=RegionGroup.EU),
        job_requested(2, hours=2, gpus=2, home="sjc1", group=RegionGroup.NA, deadline_h=2),
        job_requested(3, hours=5, gpus=8, home="fra1"),
    ]


def run(sched: Scheduler, log: list[Event], now) -> list[Event]:
    decision = sched.replan(now)
    for event in decision.events():
        sched.apply(event)
        log.append(event)
    return decision.events()


def test_assignments_go_where_the_plan_runs_jobs_now() -> None:
    sched = three_site_scheduler()
    for event in inputs():
        sched.apply(event)
    decision = sched.replan(NOW)
    starts = {a.job_id: a for a in decision.assignments}
    running_now = decision.result.running_at(int(NOW.timestamp() // 3600))
    assert set(starts) == set(running_now)
    for job_id, assignment in starts.items():
        assert (
            assignment.action is AssignmentAction.start
            and assignment.datacenter == running_now[job_id]
        )
    assert running_now[inputs()[4].job_id] == "sjc1"  # the NA job due in 2 h has one place to go
    assert (
        decision.plan is not None
        and decision.plan.expected_emissions_g < decision.plan.baseline_emissions_g
    )


def test_restart_rebuilds_the_same_plan_and_sends_nothing_twice() -> None:
    log: list[Event] = list(inputs())
    first = three_site_scheduler()
    for event in log:
        first.apply(event)
    run(first, log, NOW)
    run(first, log, NOW + timedelta(hours=1))  # an hour later: some jobs started, some paused
    assert any(e.__class__.__name__ == "Assignment" for e in log)
    before = first.state.last_plan

    restarted = three_site_scheduler()
    for event in log:  # what the stream holds: inputs and every output
        restarted.apply(event)
    again = restarted.replan(NOW + timedelta(hours=1, minutes=20))
    assert again.plan is None and again.assignments == [] and again.infeasible == []
    planned = {(e.job_id, e.datacenter, tuple(e.hours)) for e in before.entries}
    rebuilt = {(job_id, dc, tuple(hours)) for job_id, dc, hours in _entries(again.result)}
    assert rebuilt == planned


def _entries(result):
    for job in result.jobs.values():
        by_dc: dict[str, list] = {}
        for hour, dc, _ in job.slots:
            by_dc.setdefault(dc, []).append(from_epoch_hour(hour))
        for dc, hours in by_dc.items():
            yield job.job_id, dc, hours


def test_a_deadline_that_cannot_hold_gets_an_infeasible_event_once() -> None:
    sched = three_site_scheduler()
    for event in inputs():
        sched.apply(event)
    tight = job_requested(7, hours=6, gpus=2, home="sjc1", group=RegionGroup.NA, deadline_h=3)
    too_big = job_requested(8, hours=1, gpus=32, group=RegionGroup.EU)
    sched.apply(tight)
    sched.apply(too_big)
    log: list[Event] = []
    run(sched, log, NOW)
    notices = {e.job_id: e for e in log if isinstance(e, JobInfeasible)}
    assert set(notices) == {tight.job_id, too_big.job_id}
    assert notices[tight.job_id].earliest_finish == NOW + timedelta(hours=6)  # sjc1 alone, from now
    assert (
        notices[too_big.job_id].earliest_finish is None
        and "32 GPUs" in notices[too_big.job_id].reason
    )
    plan = next(e for e in log if e.__class__.__name__ == "Plan")
    assert tight.job_id in {e.job_id for e in plan.entries}  # still planned, by the offered finish
    assert set(plan.infeasible_jobs) == {tight.job_id, too_big.job_id}
    later: list[Event] = []
    run(sched, later, NOW + timedelta(minutes=30))
    assert not [e for e in later if isinstance(e, JobInfeasible)]


def test_the_plan_uses_the_expected_intensity_not_the_median() -> None:
    """Oslo's median is lower, but its upper band is far out (a spiky grid): its expected
    intensity, 0.3 x 90 + 0.4 x 100 + 0.3 x 400 = 187 g/kWh, is above Frankfurt's 150, so an
    emissions minimiser runs the job in Frankfurt."""
    skewed = forecast("NO", [100.0]).model_copy(
        update={"p10_g_per_kwh": [90.0] * 168, "p90_g_per_kwh": [400.0] * 168}
    )
    sched = with_agents(
        Scheduler(
            small_registry("fra1", "osl1"),
            Planner(HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0))),
        )
    )
    for event in (
        skewed,
        forecast("DE", [150.0]),
        job_requested(1, hours=2, home="osl1", group=RegionGroup.EU),
    ):
        sched.apply(event)
    (entry,) = sched.replan(NOW).plan.entries
    assert entry.datacenter == "fra1"
    assert entry.emissions_g == 2 * 1.0 * THREE_SITES.get("fra1").pue * 150.0
