"""The decision step with measured pace: a started job keeps its slot through its start-up, its
minimum run and its first checkpoint; the rest is planned from the measured rate plus a start-up
per resume; a late job is reported once per change of its situation."""

from __future__ import annotations

from datetime import datetime, timedelta

from metatune.contracts import (
    AssignmentAction,
    Event,
    InfeasibleAction,
    InfeasibleSituation,
    JobInfeasible,
    RegionGroup,
    RunProgress,
)
from metatune_scheduler.domain import Pace, Planner, Scheduler
from metatune_scheduler.domain.horizon import epoch_hour
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested, with_agents

STARTUP_H = 1.5


def scheduler(*names: str) -> Scheduler:
    return with_agents(
        Scheduler(small_registry(*names), Planner(), pace=Pace(min_run_h=1.0, startup_h=0.25))
    )


def step(sched: Scheduler, now: datetime, log: list[Event] | None = None) -> list[Event]:
    events = sched.replan(now).events()
    for event in events:
        sched.apply(event)
    if log is not None:
        log.extend(events)
    return events


def progress(at: datetime, step_: int, checkpoint: int | None) -> RunProgress:
    return RunProgress(
        occurred_at=at,
        job_id=job_id(1),
        datacenter="fra1",
        step=step_,
        total_steps=40,
        power_w=1000.0,
        session_started_at=NOW + timedelta(minutes=1),
        session_start_step=0,
        startup_s=STARTUP_H * 3600,
        steps_per_hour=10.0,
        checkpoint_step=checkpoint,
    )


def actions(events: list[Event]) -> list[AssignmentAction]:
    return [e.action for e in events if hasattr(e, "action")]


def test_a_started_job_runs_until_its_minimum_run_and_a_checkpoint_then_resumes_with_a_startup() -> (
    None
):
    """Clean now, dirty for ten hours, clean after: the plan wants the job paused from hour 1 on,
    but it may pause it only once it has run 1 h past its 1.5 h start-up and saved a checkpoint."""
    sched = scheduler("fra1")
    sched.apply(forecast("DE", [50.0] + [900.0] * 10 + [50.0] * 157))
    sched.apply(job_requested(1, hours=4, home="fra1", group=RegionGroup.EU, deadline_h=48))
    assert actions(step(sched, NOW)) == [AssignmentAction.start]

    sched.apply(progress(NOW + timedelta(minutes=55), 8, None))  # no checkpoint yet
    assert actions(step(sched, NOW + timedelta(hours=1))) == []
    sched.apply(progress(NOW + timedelta(hours=1, minutes=55), 15, 12))  # 1.5 h + 1 h not run yet
    assert actions(step(sched, NOW + timedelta(hours=2))) == []
    sched.apply(progress(NOW + timedelta(hours=2, minutes=55), 24, 20))
    assert actions(step(sched, NOW + timedelta(hours=3))) == [AssignmentAction.pause]

    # the rest: 16 steps at 10 per hour, plus a 1.5 h start-up to resume: 4 hours, after the dirt
    step(sched, NOW + timedelta(hours=4))
    ((dc, hours, _),) = sched.state.last_plan.stretches[job_id(1)]
    assert dc == "fra1" and len(hours) == 4 and min(hours) >= epoch_hour(NOW) + 11


def test_a_job_that_reports_no_checkpoint_yet_is_held_past_its_minimum_run() -> None:
    sched = scheduler("fra1")
    sched.apply(forecast("DE", [50.0] + [900.0] * 10 + [50.0] * 157))
    sched.apply(job_requested(1, hours=4, home="fra1", group=RegionGroup.EU, deadline_h=48))
    step(sched, NOW)
    for hour in range(1, 5):
        sched.apply(progress(NOW + timedelta(hours=hour - 1, minutes=55), 2 * hour, None))
        assert actions(step(sched, NOW + timedelta(hours=hour))) == []


def test_a_late_job_is_reported_once_per_change_of_situation_and_keeps_running_late() -> None:
    sched = scheduler("fra1", "sjc1")
    sched.apply(forecast("DE", [300.0]))
    sched.apply(forecast("US-CAL-CISO", [200.0]))
    sched.apply(job_requested(1, hours=6, home="fra1", group=RegionGroup.EU, deadline_h=2))
    log: list[Event] = []
    for hour in range(12):  # the deadline, then the first relaxed one, pass meanwhile
        step(sched, NOW + timedelta(hours=hour), log)
    notices = [e for e in log if isinstance(e, JobInfeasible)]
    assert [n.situation for n in notices] == [InfeasibleSituation.late]
    (late,) = notices
    assert late.policy is InfeasibleAction.run_late and late.deadline == NOW + timedelta(hours=2)
    assert [o.action for o in late.options][:2] == [
        InfeasibleAction.run_late,
        InfeasibleAction.drop,
    ]
    assert sched.state.jobs[job_id(1)].status.value == "running"  # never dropped

    # its datacenter's agent is lost: a new situation, reported; back again: late again, reported
    for event in sched.agent_lost("fra1", NOW + timedelta(hours=12), 60.0):
        sched.apply(event)
    step(sched, NOW + timedelta(hours=12), log)
    step(sched, NOW + timedelta(hours=13), log)
    sched.agent_back("fra1")
    for hour in (14, 15, 16):
        step(sched, NOW + timedelta(hours=hour), log)
    notices = [e for e in log if isinstance(e, JobInfeasible)]
    assert [n.situation for n in notices] == [
        InfeasibleSituation.late,
        InfeasibleSituation.no_datacenter,
        InfeasibleSituation.late,
    ]
    assert any(o.action is InfeasibleAction.relax_residency for o in notices[1].options)
    assert len({n.event_id for n in notices}) == 3


def test_a_solve_that_began_before_the_fast_path_started_a_job_does_not_pause_it() -> None:
    """The full solve reads the state, the fast path starts a job requested meanwhile, then the
    solve concludes: the job keeps the fast path's placement (it would otherwise be paused at step
    0 by a plan that never saw it)."""
    sched = scheduler("fra1")
    sched.apply(forecast("DE", [100.0]))
    solve = sched.prepare(NOW)
    sched.apply(job_requested(1, hours=3, home="fra1", group=RegionGroup.EU, deadline_h=48))
    placed = sched.place_new(NOW)
    assert placed is not None and actions(placed.events()) == [AssignmentAction.start]
    for event in placed.events():
        sched.apply(event)
    decision = sched.conclude(solve, sched.solve(solve), NOW + timedelta(minutes=1))
    assert actions(decision.events()) == []
    assert job_id(1) in decision.result.jobs


def test_a_plan_concluded_after_its_hour_turned_sends_no_assignment() -> None:
    """Prepared at 02:00 the job is held for that hour only; concluded at 03:01 the plan would pause
    it in an hour it never decided: nothing is sent, and the solve of 03:00 decides."""
    sched = scheduler("fra1")
    sched.apply(forecast("DE", [50.0] + [900.0] * 10 + [50.0] * 157))
    sched.apply(job_requested(1, hours=4, home="fra1", group=RegionGroup.EU, deadline_h=48))
    step(sched, NOW)
    sched.apply(progress(NOW + timedelta(hours=1, minutes=55), 20, 16))
    solve = sched.prepare(NOW + timedelta(hours=2))
    late = sched.conclude(solve, sched.solve(solve), NOW + timedelta(hours=3, minutes=1))
    assert actions(late.events()) == []
    assert actions(step(sched, NOW + timedelta(hours=3, minutes=1))) == [AssignmentAction.pause]
