"""Agent leases, in the domain: a silent agent is lost once, its running jobs are paused at their
checkpoint and re-planned elsewhere; it gets capacity back when it is heard again."""

from __future__ import annotations

from datetime import timedelta

from metatune.contracts import (
    Assignment,
    AssignmentAction,
    ErrorEvent,
    JobCancelled,
    Plan,
    RegionGroup,
)
from metatune_scheduler.domain import JobStatus, Scheduler
from metatune_scheduler.domain.leases import Leases
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_requested, with_agents


def test_a_lease_expires_once_and_a_heartbeat_brings_the_agent_back() -> None:
    leases = Leases(lease_s=10.0)
    leases.heard("fra1", 0.0)
    leases.expect("osl1", 5.0)
    leases.expect("osl1", 100.0)  # expecting again does not extend the lease
    assert leases.expired(9.0) == []
    assert leases.expired(11.0) == ["fra1"]
    assert leases.expired(30.0) == ["osl1"]  # fra1 is not reported twice
    assert leases.lost == {"fra1", "osl1"}
    assert leases.heard("fra1", 31.0) is True and leases.heard("fra1", 32.0) is False
    assert leases.lost == {"osl1"}


def test_no_lease_runs_out_while_the_scheduler_is_cut_off_and_each_agent_then_gets_a_full_one() -> (
    None
):
    leases = Leases(lease_s=10.0)
    leases.heard("fra1", 0.0)
    leases.heard("osl1", 4.0)
    leases.expect("sjc1", 2.0)
    leases.disconnected()  # the scheduler's own link to NATS is down from here
    assert leases.expired(45.0) == []  # a 45 s outage: the silence is the scheduler's, not theirs
    assert leases.lost == set()
    leases.reconnected(45.0)
    assert leases.expired(55.0) == []  # one full lease from the reconnection to be heard
    leases.heard("fra1", 50.0)
    assert leases.expired(55.5) == ["osl1", "sjc1"]  # silent a whole lease while reachable
    assert leases.expired(70.0) == ["fra1"]


def test_an_agent_lost_before_the_outage_stays_lost_until_it_is_heard() -> None:
    leases = Leases(lease_s=10.0)
    leases.heard("fra1", 0.0)
    assert leases.expired(11.0) == ["fra1"]
    leases.disconnected()
    leases.reconnected(30.0)
    assert leases.lost == {"fra1"} and leases.expired(31.0) == []
    assert leases.heard("fra1", 32.0) is True and leases.lost == set()


def _running_on_osl1(outputs: list | None = None) -> tuple[Scheduler, list]:
    scheduler = with_agents(Scheduler(small_registry("fra1", "osl1")))
    for region, value in (("DE", 300.0), ("NO", 20.0)):
        scheduler.apply(forecast(region, [value]))
    jobs = [job_requested(n, hours=3, group=RegionGroup.EU, home="fra1") for n in (1, 2)]
    for job in jobs:
        scheduler.apply(job)
    decision = scheduler.replan(NOW)
    for event in decision.events():
        scheduler.apply(event)
    if outputs is not None:
        outputs.extend(decision.events())
    assert {(a.datacenter, a.action) for a in decision.assignments} == {
        ("osl1", AssignmentAction.start)
    }
    return scheduler, jobs


def test_a_lost_agent_s_jobs_resume_elsewhere_from_their_checkpoint() -> None:
    scheduler, jobs = _running_on_osl1()
    scheduler.apply(
        JobCancelled(occurred_at=NOW, job_id=jobs[1].job_id)
    )  # cancelled while running there

    events = scheduler.agent_lost("osl1", NOW + timedelta(minutes=5), silent_s=21.0)
    notice, *changes = events
    assert isinstance(notice, ErrorEvent) and notice.code == "agent_lost"
    assert notice.details["datacenter"] == "osl1" and len(notice.details["jobs"]) == 2
    by_job = {change.job_id: change for change in changes}
    assert by_job[jobs[0].job_id].action is AssignmentAction.pause
    assert by_job[jobs[0].job_id].checkpoint_key == str(jobs[0].job_id)
    assert by_job[jobs[1].job_id].action is AssignmentAction.stop
    for event in events:
        scheduler.apply(event)
    assert scheduler.state.jobs[jobs[0].job_id].status is JobStatus.paused
    assert scheduler.state.jobs[jobs[1].job_id].status is JobStatus.cancelled

    decision = scheduler.replan(NOW + timedelta(minutes=6))
    resumed = [a for a in decision.assignments if a.job_id == jobs[0].job_id]
    assert [(a.datacenter, a.action, a.checkpoint_key) for a in resumed] == [
        ("fra1", AssignmentAction.resume, str(jobs[0].job_id))
    ]
    assert all(
        a.job_id != jobs[1].job_id for a in decision.assignments
    )  # nothing cancelled comes back
    for event in decision.events():
        scheduler.apply(event)

    # the lost agent's late pause (it was only cut off) does not pause the run that moved to fra1
    from metatune.contracts import RunPaused

    scheduler.apply(
        RunPaused(
            occurred_at=NOW + timedelta(minutes=7),
            job_id=jobs[0].job_id,
            study_id=jobs[0].study_id,
            datacenter="osl1",
            step=3,
            checkpoint_key="late",
        )
    )
    record = scheduler.state.jobs[jobs[0].job_id]
    assert (record.status, record.location) == (JobStatus.running, "fra1")

    scheduler.agent_back("osl1")
    assert {site.name: site.gpus for site in scheduler._sites(0)}["osl1"] > 0


def test_a_replay_of_the_lost_agent_s_pauses_rebuilds_the_same_state() -> None:
    first: list = []
    scheduler, jobs = _running_on_osl1(first)
    published: list = [*jobs]
    events = scheduler.agent_lost("osl1", NOW + timedelta(minutes=5), silent_s=21.0)
    for event in events:
        scheduler.apply(event)
    replayed = with_agents(Scheduler(small_registry("fra1", "osl1")))
    for region, value in (("DE", 300.0), ("NO", 20.0)):
        replayed.apply(forecast(region, [value]))
    for event in [
        *published,
        *[e for e in first if isinstance(e, Plan)],
        *[e for e in events if isinstance(e, Assignment)],
    ]:
        replayed.apply(event)
    # the start assignments of the first plan, as the stream holds them, then the pauses
    assert {j: (r.status, r.checkpoint_key) for j, r in replayed.state.jobs.items()} != {}
    for job in jobs:
        assert replayed.state.jobs[job.job_id].status in (JobStatus.paused, JobStatus.pending)
