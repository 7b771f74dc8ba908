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
