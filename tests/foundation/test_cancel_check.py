"""``metatune cancel`` as the external submitter on the secured bus, with the scheduler running as
its own user: the scheduler is asked where the job stands (the answer comes to the submitter's
inbox), so an unknown job is one error line and exit 1, and nothing is published."""

from __future__ import annotations

import asyncio
from uuid import uuid4

from metatune import subjects
from metatune.bus import headers_for
from metatune.contracts import JobLookup, JobLookupReply
from metatune_cli.client import AsyncClient
from metatune_scheduler.app import create_service
from tests.support.builders import small_registry
from tests.support.cli import run
from tests.support.requests import answer
from tests.support.secured_bus import SecuredBus, admin, secured  # noqa: F401 (fixtures)

from .recorded_study import TRAINED, study_events


async def cancelled_count(js) -> int:
    info = await js.stream_info("METATUNE", subjects_filter=subjects.JOBS_CANCELLED)
    return sum((info.state.subjects or {}).values())


async def test_the_submitter_cancels_only_a_job_the_scheduler_knows(
    secured: SecuredBus,  # noqa: F811
    admin,  # noqa: F811
    env_for,
) -> None:
    js = admin.jetstream()
    study = uuid4()
    logged = study_events(study)  # TRAINED requested, started at osl1, completed there
    requested = logged[1][1]
    waiting = uuid4()  # requested, not run
    again = {
        **requested.model_dump(),
        "job_id": waiting,
        "event_id": uuid4(),
        "correlation_id": None,
    }
    for subject, event in [
        *logged,
        (subjects.JOBS_REQUESTED, type(requested).model_validate(again)),
    ]:
        await js.publish(subject, event.to_bytes(), headers=headers_for(event))
    scheduler = create_service(
        settings=secured.settings("scheduler"), registry=small_registry("fra1", "osl1")
    )
    submitter = secured.settings("submitter")
    async with scheduler.running():
        await answer(admin, subjects.JOBS_LOOKUP, JobLookup(job_id=uuid4()), JobLookupReply)
        unknown = uuid4()
        env = env_for(
            METATUNE_NATS_URL=secured.address, METATUNE_NATS_NKEY_FILE=str(submitter.nats_nkey_file)
        )
        result = await asyncio.to_thread(run, ["cancel", str(unknown)], env)
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stderr.strip().splitlines() == [
            f"error: no job {unknown}: the scheduler has never seen it requested"
        ]
        assert result.stdout == ""
        assert await cancelled_count(js) == 0  # nothing published

        async with AsyncClient(submitter) as client:
            ended = await client.cancel(TRAINED)  # finished: nothing to withdraw
            assert (ended.event_id, ended.state) == (None, "finished")
            assert await cancelled_count(js) == 0
            done = await client.cancel(waiting)  # a job it knows: checked, then cancelled
        assert done.event_id is not None and done.check_skipped is None
        assert done.state in ("requested", "infeasible")
        assert await cancelled_count(js) == 1
