"""Progress events that carry the steps since the previous one (``RunProgress.points``): one
``run_metrics`` row per step, each stored once whether the event is redelivered or its steps
arrive again under another event id; a bad point list is rejected with its reason; the
migration that keys ``run_metrics`` by step rolls back and applies again."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from uuid import uuid4

from yoyo import get_backend, read_migrations

from metatune import contracts as c
from metatune import subjects
from metatune.postgres import yoyo_uri
from metatune_telemetry.app import create_service
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.samples import started

from .conftest import count, publish
from .recording import PER_EVENT, carrying, no_gap


async def test_each_step_is_one_row_and_a_redelivered_event_adds_none(
    tsettings, schema, js
) -> None:
    job = uuid4()
    events = [carrying(job, 1 + PER_EVENT * i) for i in range(4)]
    service = create_service(tsettings, schema=schema)
    async with service.running():
        await publish(js, tsettings, *started(job))
        for event in events:
            await publish(js, tsettings, subjects.run_progress("fra1", job), event)
        for event in events[1:3]:  # again, outside de-duplication: new stream messages
            await publish(js, tsettings, subjects.run_progress("fra1", job), event, dedup=False)
        await no_gap(js, service.runtime.db, tsettings)
        db = service.runtime.db
        assert await count(db, "SELECT count(*) FROM event_log") == len(events) + 1  # its start
        assert await count(db, "SELECT count(*) FROM run_metrics") == PER_EVENT * len(events)
        steps = await db.fetch(
            "SELECT step, train_loss, tokens_seen, tokens_with_padding, power_w, energy_wh, step_time_s "
            "FROM run_metrics ORDER BY step"
        )
        raw_ids = await db.fetch("SELECT DISTINCT event_id FROM run_metrics")
    assert [s for s, *_ in steps] == list(range(1, PER_EVENT * len(events) + 1))
    for step, loss, tokens, padded, power, energy, step_time in steps:
        assert (loss, tokens, padded) == (1.0 / step, 100 * step, 120 * step)
        own = step % PER_EVENT == 0  # the event's own step carries its accounting
        assert (power, energy) == ((200.0, 0.5 * step) if own else (None, None))
        assert step_time == (None if own else 0.25)
    assert {r[0] for r in raw_ids} == {e.event_id for e in events}


async def test_steps_sent_again_under_another_event_id_are_stored_once(db) -> None:
    writer = EventWriter(db)
    job = uuid4()
    first = carrying(job, 1)
    again = first.model_copy(update={"event_id": uuid4()})  # e.g. a producer re-sending its buffer
    later = carrying(job, 1 + PER_EVENT)
    subject, start = started(job)
    batches = [[start, first], [again, later]]
    seq = 0
    for batch in batches:
        messages = []
        for event in batch:
            seq += 1
            on = subject if event is start else subjects.run_progress("fra1", job)
            messages.append(Incoming("METATUNE", seq, on, event.to_bytes()))
        result = await writer.write(messages)
        assert not result.rejected
    assert await count(db, "SELECT count(*) FROM event_log") == 4  # every event is logged
    assert await count(db, "SELECT count(*) FROM run_metrics") == 2 * PER_EVENT
    assert await count(db, "SELECT count(DISTINCT step) FROM run_metrics") == 2 * PER_EVENT
    assert (
        await count(db, "SELECT count(*) FROM run_metrics WHERE event_id = %s", (again.event_id,))
        == 0
    )


def bad_point_lists() -> list[tuple[bytes, str]]:
    """(bytes, what the reason names) of progress events whose points break the contract."""
    good = json.loads(carrying(uuid4(), 1).to_bytes())
    out = []

    def variant(change, names: str) -> None:
        payload = json.loads(json.dumps(good))
        change(payload)
        out.append((json.dumps(payload).encode(), names))

    variant(lambda p: p["points"].reverse(), "steps must increase")
    variant(lambda p: p["points"][-1].update(step=p["step"]), "not before this event's step")
    variant(
        lambda p: p["points"][0].update(occurred_at="2030-01-01T00:00:00Z"),
        "times must not go back",
    )
    variant(lambda p: p["points"][1].update(learning_rate=-1.0), "points.1.learning_rate")
    variant(lambda p: p["points"][2].pop("tokens_seen"), "points.2.tokens_seen")
    variant(lambda p: p["points"].extend(p["points"][-1:] * c.MAX_POINTS_PER_EVENT), "at most 1000")
    nan = json.dumps(good).replace('"train_loss": 1.0,', '"train_loss": NaN,', 1)
    assert "NaN" in nan
    out.append((nan.encode(), "points.0.train_loss"))
    return out


async def test_a_bad_point_list_is_rejected_with_the_reason(tsettings, schema, js) -> None:
    cases = bad_point_lists()
    job = uuid4()
    service = create_service(tsettings, schema=schema)
    async with service.running():
        for data, _ in cases:
            await publish(js, tsettings, subjects.run_progress("fra1", job), data)
        await no_gap(js, service.runtime.db, tsettings)
        rejects = await service.runtime.db.fetch(
            "SELECT code, reason, raw FROM event_rejects ORDER BY stream_seq"
        )
        assert await count(service.runtime.db, "SELECT count(*) FROM run_metrics") == 0
    assert [raw for _, _, raw in rejects] == [data for data, _ in cases]
    for (code, reason, _), (_, names) in zip(rejects, cases, strict=True):
        assert code == "invalid_message"
        assert names in reason, reason


async def test_the_points_migration_rolls_back_to_one_row_per_event_and_applies_again(db) -> None:
    job = uuid4()
    events = [carrying(job, 1 + PER_EVENT * i) for i in range(3)]
    subject, start = started(job)
    await EventWriter(db).write(
        [
            Incoming("METATUNE", 1, subject, start.to_bytes()),
            *(
                Incoming("METATUNE", i + 2, subjects.run_progress("fra1", job), e.to_bytes())
                for i, e in enumerate(events)
            ),
        ]
    )
    key = (
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'run_metrics'::regclass AND contype = 'p'"
    )
    assert (await db.fetch(key))[0][0] == 'PRIMARY KEY (job_id, "time", step)'
    assert await count(db, "SELECT count(*) FROM run_metrics") == PER_EVENT * len(events)

    def rollback() -> None:
        backend = get_backend(yoyo_uri(db.url, db.schema))
        try:
            folder = resources.files("metatune_telemetry").joinpath("migrations")
            with resources.as_file(folder) as path:
                migrations = read_migrations(str(path))
                with backend.lock():
                    backend.rollback_migrations(
                        backend.to_rollback(
                            migrations.filter(lambda m: m.id == "telemetry_0005_metric_points")
                        )
                    )
        finally:
            backend.connection.close()

    await asyncio.to_thread(rollback)
    assert (await db.fetch(key))[0][0] == 'PRIMARY KEY (event_id, "time")'
    assert sorted(r[0] for r in await db.fetch("SELECT step FROM run_metrics")) == [
        e.step for e in events
    ]
    assert await db.migrate() == ["telemetry_0005_metric_points"]
    assert (await db.fetch(key))[0][0] == 'PRIMARY KEY (job_id, "time", step)'
