"""Telemetry loses no event: every valid event stored once (NUL-safe), every invalid message in
``event_rejects`` with its bytes and reason, nothing lost or doubled across a PostgreSQL restart;
``verify`` compares the stream with the database after every scenario."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from uuid import uuid4

import pytest

from metatune import contracts as c
from metatune import subjects
from metatune_cli.embedded import servers
from metatune_cli.embedded.probe import postgres_answers
from metatune_telemetry.app import create_service
from tests.support.samples import NOW, samples, started
from tests.support.servers import free_port
from tests.support.waiting import wait_for, wait_for_sync

from .conftest import count, publish, publish_all
from .recording import no_gap, samples_without_webhook


async def test_every_event_stored_once_and_redelivery_is_one_row(tsettings, schema, js) -> None:
    service = create_service(tsettings, schema=schema)
    async with service.running():
        events = samples_without_webhook()
        await publish_all(js, tsettings, events)
        # again, outside de-duplication: new stream messages
        await publish_all(js, tsettings, events[:5], dedup=False)
        await no_gap(js, service.runtime.db, tsettings)
        db = service.runtime.db
        assert await count(db, "SELECT count(*) FROM event_log") == len(events)
        assert await count(db, "SELECT count(DISTINCT event_id) FROM event_log") == len(events)
        assert await count(db, "SELECT count(*) FROM event_rejects") == 0
        assert await count(db, "SELECT count(*) FROM run_metrics") == 1
        assert await count(db, "SELECT count(*) FROM forecast_points") == 168
        assert await count(db, "SELECT count(*) FROM studies") == 1
        assert await count(db, "SELECT count(*) FROM agent_status") == 1


async def test_nul_bytes_in_a_valid_event_are_stored_and_kept_exactly(
    tsettings, schema, js
) -> None:
    error = c.ErrorEvent(
        occurred_at=NOW,
        service="profiler",
        kind=c.ErrorKind.bad_input,
        code="nul_in_row",
        message="row 3 holds \x00 here",
        payload_excerpt="a\x00b\x00",
        row=3,
    )
    service = create_service(tsettings, schema=schema)
    async with service.running():
        await publish(js, tsettings, subjects.errors("profiler"), error)
        await no_gap(js, service.runtime.db, tsettings)
        rows = await service.runtime.db.fetch(
            "SELECT payload->>'message', raw FROM event_log WHERE event_id = %s", (error.event_id,)
        )
    assert rows[0][0] == "row 3 holds \ufffd here"
    assert c.ErrorEvent.model_validate_json(rows[0][1]) == error  # the exact bytes, NULs included


def violations() -> list[tuple[str, bytes, str]]:
    """(subject, bytes, expected code): one invalid variant of every contract, and broken bytes."""
    out = []
    for subject, event in samples():
        payload = json.loads(event.to_bytes())
        payload["occurred_at"] = "not a time"
        out.append((subject, json.dumps(payload).encode(), "invalid_message"))
        payload = json.loads(event.to_bytes())
        payload["unexpected_field"] = 1
        out.append((subject, json.dumps(payload).encode(), "invalid_message"))
    submitted = json.loads(samples()[0][1].to_bytes())
    del submitted["event_id"]  # an id the consumer would have to invent: never stored as data
    out += [
        (subjects.DATASETS_SUBMITTED, json.dumps(submitted).encode(), "invalid_message"),
        (subjects.DATASETS_SUBMITTED, b"not json at all", "invalid_message"),
        (subjects.DATASETS_SUBMITTED, b'{"study_id": "\xff\xfe"}', "invalid_message"),
        (subjects.DATASETS_SUBMITTED, b'{"raw": "nul \x00 byte"}', "invalid_message"),
        (subjects.errors("profiler"), b"\x00\x00\x00", "invalid_message"),
        ("metatune.jobs.unheard_of", b"{}", "unknown_subject"),
    ]
    return out


async def test_every_contract_violation_is_rejected_with_its_bytes(tsettings, schema, js) -> None:
    cases = violations()
    service = create_service(tsettings, schema=schema)
    async with service.running():
        for subject, data, _ in cases:
            await publish(js, tsettings, subject, data)
        db = service.runtime.db
        await asyncio.wait_for(service.runtime.ready.wait(), 60)

        async def errors_back() -> bool:  # telemetry's error events about them come back as events
            query = "SELECT count(*) FROM event_log WHERE subject = 'metatune.errors.telemetry'"
            return await count(db, query) >= len(cases)

        await wait_for(errors_back, "one telemetry error event per violation stored")
        await no_gap(js, service.runtime.db, tsettings)
        rejects = await db.fetch(
            "SELECT subject, code, reason, raw FROM event_rejects ORDER BY stream, stream_seq"
        )
        # the telemetry error events about them are valid events: stored as data
        errors = await count(
            db, "SELECT count(*) FROM event_log WHERE subject = 'metatune.errors.telemetry'"
        )
        assert await count(db, "SELECT count(*) FROM studies") == 0
        assert (
            await count(
                db, "SELECT count(*) FROM event_log WHERE subject <> 'metatune.errors.telemetry'"
            )
            == 0
        )
    assert sorted((s, raw, code) for s, code, _, raw in rejects) == sorted(cases)
    assert all(reason for _, _, reason, _ in rejects)
    assert errors == len(cases)


@pytest.fixture
def private_postgres(tmp_path):
    """A PostgreSQL of this test alone, which the test may stop and start."""
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    procs = []

    def start():
        procs.append(servers.start_postgres(url, tmp_path, tmp_path))
        wait_for_sync(lambda: postgres_answers(url, 1.0), "a private PostgreSQL answering")

    def stop():
        proc = procs.pop()
        proc.send_signal(signal.SIGINT)  # a fast shutdown, as a restart does: clients are cut off
        proc.wait(30)

    start()
    yield url, start, stop
    while procs:
        stop()
    shutil.rmtree(tmp_path / "postgres", ignore_errors=True)


async def test_postgres_restart_mid_stream_loses_and_doubles_nothing(
    tsettings, js, private_postgres
) -> None:
    url, start, stop = private_postgres
    settings = tsettings.model_copy(update={"database_url": url, "telemetry_batch_size": 50})
    job = uuid4()
    progress = [
        c.RunProgress(
            occurred_at=NOW,
            job_id=job,
            datacenter="fra1",
            step=i,
            total_steps=1000,
            train_loss=1.0 / (i + 1),
        )
        for i in range(600)
    ]
    service = create_service(settings)
    async with service.running():
        await publish(js, settings, *started(job))
        for event in progress[:200]:
            await publish(js, settings, subjects.run_progress("fra1", job), event)
        await wait_for(lambda: service.status_details.get("database") == "ok")
        stop()
        for event in progress[200:400]:
            await publish(js, settings, subjects.run_progress("fra1", job), event)
        await wait_for(lambda: service.status_details.get("database") == "unavailable")
        start()
        for event in progress[400:]:
            await publish(js, settings, subjects.run_progress("fra1", job), event)
        await no_gap(js, service.runtime.db, settings)
        assert (
            await count(service.runtime.db, "SELECT count(*) FROM event_log") == 601
        )  # and its start
        assert await count(service.runtime.db, "SELECT count(*) FROM run_metrics") == 600
        assert (
            await count(service.runtime.db, "SELECT count(DISTINCT step) FROM run_metrics") == 600
        )


async def test_telemetry_started_before_postgres_migrates_once_it_answers(
    tsettings, js, private_postgres
) -> None:
    url, start, stop = private_postgres
    stop()  # PostgreSQL is down when telemetry starts (a compose stack starting in any order)
    settings = tsettings.model_copy(update={"database_url": url})
    job = uuid4()
    service = create_service(settings)
    async with service.running():
        await publish(js, settings, *started(job))
        assert not service.runtime.ready.is_set()
        start()
        await wait_for(service.runtime.ready.is_set, "the schema migrated once PostgreSQL answers")
        await no_gap(js, service.runtime.db, settings)
        assert await count(service.runtime.db, "SELECT count(*) FROM assignments") == 1
