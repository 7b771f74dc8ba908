"""Capacity is what live agents report: a datacenter is planned on only while its agent is live
(heard, or expected after a restart), with the GPUs it reports, the registry's figure only the
ceiling. Agents in 3 of the registry's 11 datacenters: the greenest one without an agent never
receives a job, from the full solve, the fast path or a re-plan after an agent is lost."""

from __future__ import annotations

from datetime import timedelta

from metatune.contracts import Assignment, AssignmentAction, Event, RegionGroup
from metatune.registry import default_registry
from metatune_scheduler.domain import JobStatus, Scheduler
from tests.support.builders import heartbeat

from .conftest import NOW, forecast, job_requested, with_agents

LIVE = ("fra1", "osl1", "sjc1")  # agents in 3 of the 11 datacenters
GREENEST = "lon1"  # no agent there, and the cleanest grid of all


def _scheduler() -> Scheduler:
    scheduler = with_agents(Scheduler(default_registry()), *LIVE)
    for dc in scheduler.registry.datacenters:
        value = {"GB": 5.0, "NO": 60.0, "US-CAL-CISO": 80.0}.get(dc.region, 400.0)
        scheduler.apply(forecast(dc.region, [value]))
    return scheduler


def _step(scheduler: Scheduler, events: list[Event], log: list[Event]) -> None:
    for event in events:
        scheduler.apply(event)
        log.append(event)


def _starts(log: list[Event]) -> set[str]:
    return {
        event.datacenter
        for event in log
        if isinstance(event, Assignment)
        and event.action in (AssignmentAction.start, AssignmentAction.resume)
    }


def test_the_greenest_datacenter_without_an_agent_never_receives_a_job() -> None:
    scheduler, log = _scheduler(), []
    jobs = [
        job_requested(n, hours=2, group=RegionGroup.EU, home=GREENEST if n % 2 else "fra1")
        for n in range(1, 9)
    ] + [job_requested(n, hours=1, home=GREENEST) for n in range(9, 13)]
    for job in jobs[:6]:
        scheduler.apply(job)
    _step(scheduler, scheduler.replan(NOW).events(), log)
    for job in jobs[6:]:  # the fast path places these into the plan's room
        scheduler.apply(job)
    decision = scheduler.place_new(NOW + timedelta(minutes=1))
    assert decision is not None
    _step(scheduler, decision.events(), log)
    _step(scheduler, scheduler.replan(NOW + timedelta(minutes=2)).events(), log)
    # the agent of osl1 is lost: its jobs resume where an agent is live, not at the greenest
    _step(scheduler, scheduler.agent_lost("osl1", NOW + timedelta(minutes=3), 30.0), log)
    _step(scheduler, scheduler.replan(NOW + timedelta(minutes=4)).events(), log)

    planned = {entry.datacenter for entry in scheduler.state.last_plan.entries}
    assert planned and planned <= set(LIVE) - {"osl1"}
    assert _starts(log) and _starts(log) <= set(LIVE)
    assert "osl1" in _starts(log)  # the clean EU site with an agent was used while it was live
    running = {
        job.location for job in scheduler.state.jobs.values() if job.status.value == "running"
    }
    assert running and running <= {"fra1", "sjc1"}


def test_capacity_is_what_the_agent_reports_and_the_registry_only_caps_it() -> None:
    registry = default_registry()
    scheduler = Scheduler(registry)
    scheduler.apply(forecast("DE", [300.0]))
    fra1 = registry.get("fra1")
    scheduler.apply(heartbeat(fra1, gpus=2))  # 2 of the registry's 16
    assert {site.name: site.gpus for site in scheduler._sites(0)}["fra1"] == 2
    for n in range(1, 5):
        scheduler.apply(job_requested(n, hours=1, home="fra1", group=RegionGroup.EU))
    decision = scheduler.replan(NOW)
    starts = [a for a in decision.assignments if a.action is AssignmentAction.start]
    assert [a.datacenter for a in starts] == ["fra1", "fra1"]  # two now, the others wait
    scheduler.apply(heartbeat(fra1, gpus=64))  # more than the registry lists: capped
    assert {site.name: site.gpus for site in scheduler._sites(0)}["fra1"] == fra1.gpus


def test_no_agent_heard_means_no_capacity_and_a_notice_instead_of_an_assignment() -> None:
    scheduler = Scheduler(default_registry())
    scheduler.apply(forecast("DE", [300.0]))
    scheduler.apply(job_requested(1, hours=1, home="fra1", group=RegionGroup.EU, deadline_h=3))
    decision = scheduler.replan(NOW)
    assert decision.assignments == [] and decision.result.jobs == {}
    assert [notice.job_id for notice in decision.infeasible] == [job_requested(1, hours=1).job_id]
    with_agents(scheduler, "fra1")  # its agent is heard: the job starts there
    assert [
        (a.datacenter, a.action) for a in scheduler.replan(NOW + timedelta(minutes=1)).assignments
    ] == [("fra1", AssignmentAction.start)]


def test_after_a_restart_an_expected_agent_keeps_its_running_jobs_room_and_no_more() -> None:
    first = _scheduler()
    job = job_requested(1, hours=3, group=RegionGroup.EU, home="fra1")
    first.apply(job)
    events = first.replan(NOW).events()
    assert [(a.datacenter, a.action) for a in events if isinstance(a, Assignment)] == [
        ("osl1", AssignmentAction.start)
    ]
    restarted = Scheduler(default_registry())  # the stream replayed: no heartbeat in it
    for event in [
        *[
            forecast(dc.region, [60.0 if dc.region == "NO" else 400.0])
            for dc in restarted.registry.datacenters
        ],
        job,
        *events,
    ]:
        restarted.apply(event)
    assert restarted.state.jobs[job.job_id].status is JobStatus.running
    restarted.agent_expected("osl1")  # its lease starts: it owes a heartbeat
    assert {site.name: site.gpus for site in restarted._sites(0)}["osl1"] == job.gpus
    restarted.apply(job_requested(2, hours=1, group=RegionGroup.EU, home="fra1"))
    decision = restarted.replan(NOW + timedelta(minutes=1))
    assert all(a.job_id != job.job_id for a in decision.assignments)  # it keeps running there
    assert not [a for a in decision.assignments if a.datacenter == "osl1"]
    restarted.apply(heartbeat(restarted.registry.get("osl1")))  # heard: its full capacity again
    assert {site.name: site.gpus for site in restarted._sites(0)}["osl1"] == 16
