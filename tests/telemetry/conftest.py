"""Fixtures of the telemetry tests: a schema of each test's own in the real PostgreSQL, a NATS
server of each test's own (so ``verify`` compares exactly this test's stream), and helpers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import nats
import pytest

from metatune.bus import headers_for, stream_for
from metatune.contracts import Event
from metatune_telemetry.adapters.db import Database
from metatune_telemetry.settings import TelemetrySettings
from tests.support.databases import count, schema

__all__ = ["count", "schema"]


@pytest.fixture
async def db(schema: str) -> AsyncIterator[Database]:
    database = Database(TelemetrySettings().database_url, schema=schema)
    await database.migrate()
    yield database
    await database.close()


@pytest.fixture
def tsettings(private_nats: str) -> TelemetrySettings:
    return TelemetrySettings(
        nats_url=private_nats,
        telemetry_http_port=0,
        heartbeat_s=0.5,
        retry_backoff_s=0.2,
        webhook_allowed_networks=["127.0.0.1/32"],
        webhook_backoff_s=0.2,
        webhook_timeout_s=1.0,
        webhook_max_attempts=3,
        telemetry_batch_size=200,
    )


@pytest.fixture
async def js(tsettings: TelemetrySettings):
    nc = await nats.connect(tsettings.nats_url)
    yield nc.jetstream()
    await nc.close()


async def publish(
    js, settings: TelemetrySettings, subject: str, event: Event | bytes, *, dedup: bool = True
) -> None:
    """Publish an event (with its Nats-Msg-Id unless ``dedup`` is False) or raw bytes."""
    if isinstance(event, bytes):
        await js.publish(subject, event, stream=stream_for(subject, settings))
    else:
        await js.publish(
            subject,
            event.to_bytes(),
            headers=headers_for(event) if dedup else None,
            stream=stream_for(subject, settings),
        )


async def publish_all(
    js, settings: TelemetrySettings, events: Iterable[tuple[str, Event]], *, dedup: bool = True
) -> None:
    """Publish each (subject, event) of ``events`` in order."""
    for subject, event in events:
        await publish(js, settings, subject, event, dedup=dedup)


async def publish_ready(service: Any, js, events: Iterable[tuple[str, Event]]) -> None:
    """Publish ``events`` to a running telemetry ``service`` (on its settings' streams) and wait
    until it is ready (a minute at most)."""
    await publish_all(js, service.settings, events)
    await asyncio.wait_for(service.runtime.ready.wait(), 60)
