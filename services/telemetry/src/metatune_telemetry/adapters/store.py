"""PostgreSQL / TimescaleDB storage of events (psycopg 3)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from metatune.errors import DatabaseUnavailable


class EventStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self.timescale = False
        self._conn: psycopg.AsyncConnection | None = None

    async def connect(self) -> None:
        try:
            self._conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(self.url, str(exc).strip()) from exc
        await self._migrate()

    async def _migrate(self) -> None:
        conn = self._require()
        schema = resources.files("metatune_telemetry").joinpath("adapters/schema.sql").read_text()
        await conn.execute(schema)
        cur = await conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb'")
        if await cur.fetchone():
            await conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
            await conn.execute("SELECT create_hypertable('events', 'occurred_at', if_not_exists => TRUE, migrate_data => TRUE)")
            self.timescale = True

    async def insert(self, subject: str, payload: dict[str, Any]) -> bool:
        """Store one event; returns False when it was already stored (redelivery)."""
        conn = self._require()
        cur = await conn.execute(
            "INSERT INTO events (occurred_at, subject, event_id, correlation_id, payload) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (payload["occurred_at"], subject, payload["event_id"], payload.get("correlation_id"), Jsonb(payload)),
        )
        return cur.rowcount == 1

    async def has(self, event_id: str) -> bool:
        cur = await self._require().execute("SELECT 1 FROM events WHERE event_id = %s LIMIT 1", (event_id,))
        return await cur.fetchone() is not None

    async def remember_study(self, study_id: str, webhook_url: str | None, submitted_at: str) -> None:
        await self._require().execute(
            "INSERT INTO studies (study_id, webhook_url, submitted_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (study_id, webhook_url, submitted_at),
        )

    async def remember_job(self, job_id: str, study_id: str) -> None:
        await self._require().execute(
            "INSERT INTO jobs (job_id, study_id) VALUES (%s, %s) ON CONFLICT DO NOTHING", (job_id, study_id)
        )

    async def webhook_for(self, study_id: str | None, job_id: str | None) -> str | None:
        """The webhook of the study an event belongs to (through its job if it names only a job)."""
        cur = await self._require().execute(
            "SELECT s.webhook_url FROM studies s WHERE s.study_id = COALESCE(%s::uuid, "
            "(SELECT study_id FROM jobs WHERE job_id = %s::uuid))",
            (study_id, job_id),
        )
        row = await cur.fetchone()
        return row[0] if row else None

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    def _require(self) -> psycopg.AsyncConnection:
        if self._conn is None:
            raise RuntimeError("EventStore.connect() was not called")
        return self._conn


def parse_event(data: bytes) -> dict[str, Any]:
    """Decode an event envelope; raises ValueError if it is not one."""
    payload = json.loads(data)
    if not isinstance(payload, dict) or "event_id" not in payload or "occurred_at" not in payload:
        raise ValueError("not a MetaTune event envelope (event_id and occurred_at required)")
    return payload
