"""metatune.requests.jobs.lookup through a real NATS: the scheduler, its state replayed from the
log, says whether it knows a job, its study and where it stands; asking changes nothing."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import nats
import pytest

from metatune import subjects
from metatune.bus import ensure_streams, headers_for
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    Event,
    FailureReason,
    JobLookup,
    JobLookupReply,
    RunFailed,
)
from metatune_scheduler.app import create_service
from metatune_scheduler.settings import SchedulerSettings
from tests.support.builders import small_registry
from tests.support.requests import answer

from .conftest import NOW, job_id, job_requested

REGISTRY = small_registry("fra1", "osl1")


def log() -> list[tuple[str, Event]]:
    """Job 1 waits; job 2 started at osl1 and failed there (it has ended)."""
    started = Assignment(
        occurred_at=NOW + timedelta(minutes=1),
        job_id=job_id(2),
        study_id=job_id(1002),
        datacenter="osl1",
        action=AssignmentAction.start,
        plan_version=1,
    )
    failed = RunFailed(
        occurred_at=NOW + timedelta(minutes=5),
        job_id=job_id(2),
        datacenter="osl1",
        reason=FailureReason.out_of_memory,
        message="OOM",
    )
    return [
        (subjects.JOBS_REQUESTED, job_requested(1, hours=2)),
        (subjects.JOBS_REQUESTED, job_requested(2, hours=1)),
        (subjects.assignments("osl1"), started),
        (subjects.runs_failed("osl1"), failed),
    ]


@pytest.mark.asyncio
async def test_the_scheduler_answers_where_a_job_stands(module_nats: str) -> None:
    settings = SchedulerSettings(
        nats_url=module_nats,
        clock="simulated",
        sim_seconds_per_hour=3600.0,
        sim_start=NOW,
        agent_lease_s=3600.0,
    )
    nc = await nats.connect(module_nats)
    js = nc.jetstream()
    await ensure_streams(js, settings)
    for subject, event in log():
        await js.publish(subject, event.to_bytes(), headers=headers_for(event))

    async def ask(job) -> JobLookupReply:
        return await answer(nc, subjects.JOBS_LOOKUP, JobLookup(job_id=job), JobLookupReply)

    service = create_service(settings=settings, registry=REGISTRY, debounce_s=0.2)
    try:
        async with service.running():
            waiting, ended, unknown = await ask(job_id(1)), await ask(job_id(2)), await ask(uuid4())
            jobs = service.runtime.scheduler.state.jobs
            assert set(jobs) == {job_id(1), job_id(2)}  # a lookup adds no job
        stored = await js.stream_info(settings.stream_name)
    finally:
        await nc.close()
    assert waiting.known and waiting.study_id == job_id(1001)
    assert waiting.state in ("requested", "infeasible", "assigned")  # no agent: it cannot run yet
    assert (ended.known, ended.study_id, ended.state) == (True, job_id(1002), "finished")
    assert not unknown.known and unknown.state is None and unknown.study_id is None
    assert stored.state.subjects is None or subjects.JOBS_LOOKUP not in stored.state.subjects
