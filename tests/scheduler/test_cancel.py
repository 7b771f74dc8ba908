"""Cancelling a job (metatune.jobs.cancelled): a running job gets a stop where it runs, a waiting
one is never started, the plan lets its room go, and a replay of the log agrees."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import timedelta
from uuid import NAMESPACE_DNS, uuid5

import nats
import pytest
from pydantic import ValidationError

from metatune import subjects
from metatune.bus import headers_for
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    ErrorEvent,
    Event,
    FailureReason,
    JobCancelled,
    RegionGroup,
    RunFailed,
)
from metatune_scheduler.app import create_service
from metatune_scheduler.domain import Scheduler
from metatune_scheduler.domain.state import JobStatus
from metatune_scheduler.settings import SchedulerSettings
from tests.support.waiting import received_on, wait_for

from .conftest import (
    NOW,
    THREE_SITES,
    announce_agents,
    forecast,
    job_id,
    job_requested,
    three_site_scheduler,
)


def inputs() -> list[Event]:
    return [
        forecast("DE", [300.0]),
        forecast("NO", [30.0]),
        forecast("US-CAL-CISO", [250.0]),
        job_requested(1, hours=3, gpus=4, home="fra1", group=RegionGroup.EU),
        job_requested(
            2, hours=4, gpus=2, home="sjc1", group=RegionGroup.NA, deadline_h=4
        ),  # must run now
    ]


def cancelled(n: int, at=NOW) -> JobCancelled:
    return JobCancelled(
        event_id=uuid5(NAMESPACE_DNS, f"cancel-{n}"),
        occurred_at=at,
        job_id=job_id(n),
        reason="not needed",
    )


def step(sched: Scheduler, log: list[Event], now) -> list[Assignment]:
    decision = sched.replan(now)
    for event in decision.events():
        sched.apply(event)
        log.append(event)
    return decision.assignments


def test_a_running_job_that_is_cancelled_is_stopped_where_it_runs_once() -> None:
    sched, log = three_site_scheduler(), list(inputs())
    for event in log:
        sched.apply(event)
    started = step(sched, log, NOW)
    assert (job_id(2), AssignmentAction.start, "sjc1") in {
        (a.job_id, a.action, a.datacenter) for a in started
    }

    log.append(cancelled(2, NOW + timedelta(minutes=10)))
    sched.apply(log[-1])
    changes = step(sched, log, NOW + timedelta(minutes=11))
    assert [(a.job_id, a.action, a.datacenter) for a in changes] == [
        (job_id(2), AssignmentAction.stop, "sjc1")
    ]
    assert job_id(2) not in {entry.job_id for entry in sched.state.last_plan.entries}
    assert sched.state.jobs[job_id(2)].status is JobStatus.cancelled
    assert step(sched, log, NOW + timedelta(minutes=30)) == []  # the stop is not sent again

    # the agent reports the run it stopped: the job stays cancelled, not failed
    sched.apply(
        RunFailed(
            occurred_at=NOW + timedelta(minutes=12),
            job_id=job_id(2),
            datacenter="sjc1",
            reason=FailureReason.stopped,
            message="stopped by the scheduler",
        )
    )
    assert sched.state.jobs[job_id(2)].status is JobStatus.cancelled

    restarted = three_site_scheduler()  # the log replayed: same verdict, nothing to send
    for event in log:
        restarted.apply(event)
    assert restarted.state.jobs[job_id(2)].status is JobStatus.cancelled
    assert restarted.replan(NOW + timedelta(minutes=40)).assignments == []


def test_a_waiting_job_that_is_cancelled_is_never_started() -> None:
    sched = three_site_scheduler()
    for event in inputs():
        sched.apply(event)
    sched.apply(
        job_requested(3, hours=2, gpus=16, home="osl1", group=RegionGroup.EU, deadline_h=2)
    )  # due now
    first = sched.replan(NOW)
    assert first.result.running_at(int(NOW.timestamp() // 3600)).get(job_id(3)) == "osl1"

    sched.apply(cancelled(3))
    decision = sched.replan(NOW)
    assert job_id(3) not in decision.result.jobs
    assert all(a.job_id != job_id(3) for a in decision.assignments)
    assert sched.state.jobs[job_id(3)].status is JobStatus.cancelled
    assert job_id(3) not in {job.job_id for job in sched.state.plannable_jobs()}


def test_a_cancellation_that_comes_before_its_request_still_holds() -> None:
    sched = three_site_scheduler()
    sched.apply(cancelled(1))
    assert job_id(1) in sched.state.early_cancellations
    for event in inputs():
        sched.apply(event)
    assert sched.state.jobs[job_id(1)].status is JobStatus.cancelled
    assert job_id(1) not in sched.replan(NOW).result.jobs


def test_a_cancellation_needs_a_reason() -> None:
    with pytest.raises(ValidationError):
        JobCancelled(occurred_at=NOW, job_id=job_id(1), reason="")


@pytest.mark.asyncio
async def test_metatune_cancel_stops_the_job_through_nats_and_an_unknown_id_is_reported(
    module_nats: str, tmp_path
) -> None:
    settings = SchedulerSettings(
        nats_url=module_nats,
        clock="simulated",
        sim_seconds_per_hour=3600.0,
        sim_start=NOW,
        heartbeat_s=0.5,
        agent_lease_s=3600.0,  # agents heard once (announce_agents): none is lost here
    )
    nc = await nats.connect(module_nats)
    received: list[Assignment] = await received_on(nc, subjects.ASSIGNMENTS_ALL, Assignment)
    errors: list[ErrorEvent] = await received_on(nc, subjects.errors("scheduler"), ErrorEvent)
    service = create_service(settings=settings, registry=THREE_SITES, debounce_s=0.2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")}
    env.update(METATUNE_NATS_URL=module_nats, METATUNE_DATA_DIR=str(tmp_path))
    try:
        async with service.running():
            js = nc.jetstream()
            await announce_agents(js, service)
            for event in inputs():
                subject = (
                    subjects.forecasts(event.region)
                    if hasattr(event, "region")
                    else subjects.JOBS_REQUESTED
                )
                await js.publish(
                    subject, event.to_bytes(), headers={"Nats-Msg-Id": str(event.event_id)}
                )
            await wait_for(lambda: any(a.job_id == job_id(2) for a in received))
            assert [(a.action, a.datacenter) for a in received if a.job_id == job_id(2)] == [
                (AssignmentAction.start, "sjc1")
            ]

            unknown = uuid5(NAMESPACE_DNS, "no-such-job")
            for job, code in (
                (job_id(2), 0),
                (unknown, 1),
            ):  # the CLI refuses a job the log never requested
                result = await asyncio.to_thread(
                    subprocess.run,
                    [
                        sys.executable,
                        "-m",
                        "metatune_cli.cli",
                        "cancel",
                        str(job),
                        "--reason",
                        "budget cut",
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert result.returncode == code, result.stderr
            assert result.stderr.strip() == f"error: no job {unknown} in the event log"
            other_system = JobCancelled(
                occurred_at=NOW, job_id=unknown, reason="budget cut"
            )  # the scheduler still checks
            await js.publish(
                subjects.JOBS_CANCELLED, other_system.to_bytes(), headers=headers_for(other_system)
            )
            await wait_for(
                lambda: any(a.action is AssignmentAction.stop for a in received) and errors
            )
        stops = [a for a in received if a.action is AssignmentAction.stop]
        assert [(a.job_id, a.datacenter) for a in stops] == [(job_id(2), "sjc1")]
        assert [(e.code, e.correlation_id) for e in errors] == [
            ("unknown_job", str(uuid5(NAMESPACE_DNS, "no-such-job")))
        ]
    finally:
        await nc.close()
