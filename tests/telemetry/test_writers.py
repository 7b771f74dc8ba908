"""Several writer processes on one durable consumer lose, double and misreport nothing.

With ``telemetry_writers`` > 1 the service shares the event log stream with writer processes;
JetStream hands each message to one of them, so an event and its redelivery land in different
processes' concurrent transactions, and a contract violation is rejected by a process that
cannot publish the error event itself.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from metatune import contracts as c
from metatune import subjects
from metatune.bus import ensure_streams
from metatune_telemetry.app import create_service
from metatune_telemetry.ingest.adapters.consumer import delivery, stream_seq
from metatune_telemetry.ingest.adapters.writer_pool import LOG_DURABLE, log_consumer_config
from tests.support.samples import NOW, started
from tests.support.waiting import wait_for

from .conftest import count, publish
from .recording import no_gap


def progress(job, n: int) -> list[c.RunProgress]:
    return [
        c.RunProgress(
            occurred_at=NOW,
            job_id=job,
            datacenter="fra1",
            step=i,
            total_steps=10_000,
            train_loss=1.0 / (i + 1),
            accounting=c.RunAccounting(
                energy_wh=0.5 * i,
                hours=[c.HourlyEnergy(hour=NOW, energy_wh=0.5 * i, g_per_kwh=300.0)],
            ),
        )
        for i in range(n)
    ]


async def _stored_starts(service, n: int) -> bool:
    return await count(service.runtime.db, "SELECT count(*) FROM assignments") >= n


async def test_writer_processes_share_the_stream_and_store_each_event_once(
    tsettings, schema, js
) -> None:
    settings = tsettings.model_copy(update={"telemetry_writers": 3, "telemetry_batch_size": 40})
    jobs = [uuid4() for _ in range(3)]
    events = [(job, e) for job in jobs for e in progress(job, 400)]
    invalid = [
        json.dumps({"occurred_at": "not a time", "job_id": str(job)}).encode() for job in jobs
    ]
    service = create_service(settings, schema=schema)
    async with service.running():
        await wait_for(
            lambda: service.runtime.writers.started.value >= 2, "both writer processes pulling"
        )
        for (
            job
        ) in jobs:  # stored before any progress: a run event counts only from its job's datacenter
            await publish(js, settings, *started(job))
        await wait_for(lambda: _stored_starts(service, len(jobs)), "the jobs' starts stored")
        for job, event in events:
            await publish(js, settings, subjects.run_progress("fra1", job), event)
        for job, event in events[::3]:  # again, outside de-duplication: new stream messages
            await publish(js, settings, subjects.run_progress("fra1", job), event, dedup=False)
        for job, data in zip(jobs, invalid, strict=True):
            await publish(js, settings, subjects.run_progress("fra1", job), data)
        await no_gap(js, service.runtime.db, settings)
        db = service.runtime.db

        async def errors_back() -> bool:  # the service publishes the writers' rejects too
            query = "SELECT count(*) FROM event_log WHERE subject = 'metatune.errors.telemetry'"
            return await count(db, query) >= len(invalid)

        await wait_for(errors_back, "one telemetry error event per invalid message")
        assert await count(db, "SELECT count(*) FROM run_metrics") == len(events)
        assert await count(db, "SELECT count(DISTINCT event_id) FROM run_metrics") == len(events)
        assert await count(db, "SELECT count(*) FROM event_rejects") == len(invalid)
        # the job-hour energy is the latest accounting of each job, whichever process stored it
        energy = await db.fetch("SELECT job_id, energy_wh FROM job_energy ORDER BY job_id")
        assert sorted(energy) == sorted((job, 0.5 * 399) for job in jobs)
        rollup = await db.fetch("SELECT sum(energy_wh) FROM energy_hourly_job")
        assert rollup[0][0] == pytest.approx(3 * 0.5 * 399)
        # the work was shared: the writer processes stored events too
        await wait_for(
            lambda: sum(service.runtime.writers.stored) > 0, "events stored by the writers"
        )


@pytest.mark.slow  # writer processes over a backlog
async def test_a_backlog_read_by_several_writers_keeps_every_genuine_run_event(
    tsettings, schema, js
) -> None:
    """Starts and progress already in the stream when the writers start: a run event may be
    judged while another process still holds its job's start uncommitted. It is redelivered
    until that start is stored, never refused for it; a forgery is still refused, once."""
    settings = tsettings.model_copy(update={"telemetry_writers": 3, "telemetry_batch_size": 7})
    jobs = [uuid4() for _ in range(6)]
    events = [(job, e) for job in jobs for e in progress(job, 30)]
    await ensure_streams(js, settings)
    for job in jobs:  # each job's start, then its progress, all before telemetry reads any
        await publish(js, settings, *started(job))
        for event in progress(job, 30):
            await publish(js, settings, subjects.run_progress("fra1", job), event)
    forged = progress(uuid4(), 1)[0]  # a job no one assigned
    await publish(js, settings, subjects.run_progress("fra1", forged.job_id), forged)
    # the shared consumer paused until every writer process pulls, so all three take batches
    until = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await js.add_consumer(
        settings.stream_name, config=log_consumer_config(settings), pause_until=until
    )
    service = create_service(settings, schema=schema)
    async with service.running():
        await wait_for(
            lambda: service.runtime.writers.started.value >= 2, "both writer processes pulling"
        )
        await js.resume_consumer(settings.stream_name, LOG_DURABLE)
        await no_gap(js, service.runtime.db, settings)
        db = service.runtime.db
        assert await count(db, "SELECT count(*) FROM run_metrics") == len(events)
        rejects = await db.fetch("SELECT code, raw FROM event_rejects")
        assert rejects == [("foreign_run_event", forged.to_bytes())]


def test_stream_sequence_and_delivery_are_read_from_both_ack_subject_forms() -> None:
    assert stream_seq("$JS.ACK.METATUNE.telemetry-log.1.42.40.1700000000000000000.7") == 42
    v2 = "$JS.ACK._.ACCOUNTHASH.METATUNE.telemetry-log.3.42.40.1700000000000000000.7.tok"
    assert stream_seq(v2) == 42
    assert delivery(v2) == (42, 3)
    with pytest.raises(ValueError, match="not a JetStream ack subject"):
        stream_seq("_INBOX.abc")
