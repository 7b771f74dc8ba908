"""Telemetry stores every event of the log once, in a real PostgreSQL."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from metatune import subjects
from metatune.bus import headers_for, stream_for
from metatune.settings import Settings
from metatune_telemetry.app import create_service
from metatune_telemetry.adapters.store import parse_event

from ..foundation.conftest import settings  # noqa: F401  (fixture)
from ..foundation.samples import JOB, samples


@pytest.fixture
def schema_url() -> Iterator[str]:
    """A schema of this test alone (via search_path) in the real database."""
    url = Settings().database_url
    schema = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_parse_event_rejects_non_envelopes() -> None:
    with pytest.raises(ValueError):
        parse_event(b'{"hello": 1}')
    with pytest.raises(ValueError):
        parse_event(b"not json")


def without_webhook(event):
    spec = getattr(event, "spec", None)
    return event.model_copy(update={"spec": spec.model_copy(update={"webhook_url": None})}) if spec else event


async def count_events(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        return (await (await conn.execute("SELECT count(*) FROM events")).fetchone())[0]


async def test_every_event_of_the_log_is_stored_once(settings: Settings, schema_url: str) -> None:  # noqa: F811
    service = create_service(settings.model_copy(update={"database_url": schema_url}))
    async with service.running():
        logged = [(s, without_webhook(e)) for s, e in samples() if stream_for(s, settings) == settings.stream_name]
        for subject, event in logged:
            await service.js.publish(subject, event.to_bytes(), headers=headers_for(event), stream=settings.stream_name)
        subject, first = logged[0]  # the same event again, outside de-duplication (no Nats-Msg-Id)
        await service.js.publish(subject, first.to_bytes(), stream=settings.stream_name)
        await service.js.publish("metatune.errors.somebody", b'{"not": "an event"}', stream=settings.stream_name)
        for _ in range(300):
            if await count_events(schema_url) >= len(logged) + 1:  # + the error event about the bad one
                break
            await asyncio.sleep(0.1)
    assert await count_events(schema_url) == len(logged) + 1
    async with await psycopg.AsyncConnection.connect(schema_url) as conn:
        row = await (await conn.execute("SELECT payload->>'code' FROM events WHERE subject = 'metatune.errors.telemetry'")).fetchone()
    assert row == ("not_an_event",)


class Receiver(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["content-length"]))
        Receiver.received.append({"key": self.headers["idempotency-key"], **json.loads(body)})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


async def test_study_webhook_hears_its_study_and_job_events(settings: Settings, schema_url: str) -> None:  # noqa: F811
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Receiver.received = []
    hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
    by_subject = dict((s, e) for s, e in samples())
    submitted = by_subject[subjects.DATASETS_SUBMITTED]
    submitted = submitted.model_copy(update={"spec": submitted.spec.model_copy(update={"webhook_url": hook})})
    ordered = [
        (subjects.DATASETS_SUBMITTED, submitted),
        (subjects.DATASETS_PROFILED, by_subject[subjects.DATASETS_PROFILED]),
        (subjects.JOBS_REQUESTED, by_subject[subjects.JOBS_REQUESTED]),
        (subjects.run_progress(JOB), by_subject[subjects.run_progress(JOB)]),
        (subjects.RUNS_FAILED, by_subject[subjects.RUNS_FAILED]),  # names only the job
        (subjects.RUNS_COMPLETED, by_subject[subjects.RUNS_COMPLETED]),
    ]
    service = create_service(settings.model_copy(update={"database_url": schema_url}))
    try:
        async with service.running():
            for subject, event in ordered:
                await service.js.publish(subject, event.to_bytes(), headers=headers_for(event),
                                         stream=settings.stream_name)
            for _ in range(300):
                if len(Receiver.received) >= 4:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # nothing else may arrive
    finally:
        server.shutdown()
    got = [r["subject"] for r in Receiver.received]
    assert got == [subjects.DATASETS_PROFILED, subjects.JOBS_REQUESTED, subjects.RUNS_FAILED, subjects.RUNS_COMPLETED]
    assert all(r["key"] == r["event"]["event_id"] for r in Receiver.received)
