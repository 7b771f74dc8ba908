"""The observation store: the hourly intensity the forecaster has observed, per zone and signal,
in PostgreSQL (a TimescaleDB hypertable where the extension loads).

The forecaster owns the table (``migrations/forecaster_0001_observations.py``, applied by yoyo
like the knowledge base's and telemetry's). Writes are idempotent upserts keyed by (zone, signal,
hour): storing the same hours again changes nothing, a revised value replaces the old one. A
database that does not answer is a :class:`~metatune.errors.DatabaseUnavailable`, whose message
names the URL without its password.

Usage::

    async with ObservationStore(settings.database_url) as store:
        await store.migrate()
        await store.upsert("DE", Signal.average, "electricity-maps", series)
        history = await store.observed("DE", Signal.average, start, end)
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import pandas as pd
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from metatune.errors import ConfigurationError, DatabaseUnavailable
from metatune.postgres import yoyo_uri
from metatune.redaction import redact, redact_url

from ..domain.observations import hourly
from ..domain.providers import Signal

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_UNAVAILABLE = (psycopg.OperationalError, PoolTimeout)

_UPSERT = """
INSERT INTO intensity_observations AS o (zone, signal, hour, intensity, source, fetched_at)
SELECT %(zone)s, %(signal)s, t.hour, t.intensity, %(source)s, %(fetched_at)s
  FROM unnest(%(hours)s::timestamptz[], %(values)s::float8[]) AS t(hour, intensity)
ON CONFLICT (zone, signal, hour) DO UPDATE
   SET intensity = EXCLUDED.intensity, source = EXCLUDED.source, fetched_at = EXCLUDED.fetched_at
 WHERE (o.intensity, o.source) IS DISTINCT FROM (EXCLUDED.intensity, EXCLUDED.source)
RETURNING (xmax = 0) AS inserted"""

_RANGE = "FROM intensity_observations WHERE zone = %s AND signal = %s AND hour >= %s AND hour < %s"


@dataclass(frozen=True)
class Upserted:
    """What one upsert did: hours new to the store, hours whose value (or source) changed."""

    new: int = 0
    changed: int = 0

    def __add__(self, other: Upserted) -> Upserted:
        return Upserted(self.new + other.new, self.changed + other.changed)


class ObservationStore:
    """Async access to ``intensity_observations``. ``schema``: a PostgreSQL schema of its own
    (tests), else the connection's search path."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        connect_timeout_s: float = 2.0,
        max_connections: int = 2,
    ) -> None:
        if schema is not None and not _SCHEMA.match(schema):
            raise ConfigurationError(
                f"schema name {schema!r}: lower-case letters, digits and _ only"
            )
        self.url = url
        self.schema = schema
        self.connect_timeout_s = connect_timeout_s
        self.max_connections = max_connections
        self._pool: AsyncConnectionPool | None = None
        self._lock = asyncio.Lock()
        self._migrated = False

    def _failed(self, exc: BaseException) -> DatabaseUnavailable:
        return DatabaseUnavailable(redact_url(self.url), redact(str(exc).strip()))

    def _connect_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(self.connect_timeout_s)),
        }
        if self.schema:
            args["options"] = f"-c search_path={self.schema}"
        return args

    async def _open(self) -> AsyncConnectionPool:
        async with self._lock:
            if self._pool is None:
                wait_s = max(3.0, 2 * self.connect_timeout_s)
                pool = AsyncConnectionPool(
                    self.url,
                    kwargs=self._connect_args(),
                    min_size=1,
                    max_size=self.max_connections,
                    open=False,
                    check=AsyncConnectionPool.check_connection,
                    timeout=wait_s,
                    name="metatune-forecaster",
                )
                try:
                    await pool.open(wait=True, timeout=wait_s)
                except PoolTimeout as exc:
                    await pool.close()
                    raise self._failed(exc) from exc
                self._pool = pool
            return self._pool

    async def _execute(self, query: str, params: Any) -> list[tuple[Any, ...]]:
        pool = self._pool or await self._open()
        try:
            async with pool.connection() as conn:
                cursor = await conn.execute(query, params)
                return await cursor.fetchall() if cursor.description else []
        except _UNAVAILABLE as exc:
            raise self._failed(exc) from exc

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> ObservationStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ----------------------------------------------------------------- schema
    async def migrate(self) -> list[str]:
        """Apply the forecaster's migrations not yet applied (re-runnable; yoyo's lock serialises
        processes); returns the ids applied now."""
        if self.schema:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, **self._connect_args()
                ) as conn:
                    await conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self.schema)
                        )
                    )
            except _UNAVAILABLE as exc:
                raise self._failed(exc) from exc
        applied = await asyncio.to_thread(self._migrate_sync)
        self._migrated = True
        return applied

    async def ready(self) -> None:
        """Migrate once per process (the service calls it before its first read)."""
        if not self._migrated:
            await self.migrate()

    def _migrate_sync(self) -> list[str]:
        from yoyo import get_backend, read_migrations

        try:
            backend = get_backend(yoyo_uri(self.url, self.schema, self.connect_timeout_s))
        except psycopg.OperationalError as exc:
            raise self._failed(exc) from exc
        try:
            folder = resources.files("metatune_forecaster").joinpath("migrations")
            with resources.as_file(folder) as path, backend.lock(timeout=60):
                todo = backend.to_apply(read_migrations(str(path)))
                backend.apply_migrations(todo)
                return [migration.id for migration in todo]
        finally:
            backend.connection.close()

    # ----------------------------------------------------------------- observations
    async def upsert(
        self,
        zone: str,
        signal: Signal,
        source: str,
        values: pd.Series,
        fetched_at: datetime | None = None,
    ) -> Upserted:
        """Store ``values`` (gCO2eq/kWh by hour, see :func:`hourly`) for ``zone``; idempotent."""
        series = hourly(values)
        if series.empty:
            return Upserted()
        rows = await self._execute(
            _UPSERT,
            {
                "zone": zone,
                "signal": str(signal),
                "source": source,
                "fetched_at": fetched_at or datetime.now(UTC),
                "hours": [ts.to_pydatetime() for ts in series.index],
                "values": series.tolist(),
            },
        )
        new = sum(1 for (inserted,) in rows if inserted)
        return Upserted(new=new, changed=len(rows) - new)

    async def observed(
        self, zone: str, signal: Signal, start: datetime, end: datetime
    ) -> pd.Series:
        """The stored intensity of ``zone`` on ``[start, end)``: hourly UTC index, stored hours only."""
        rows = await self._execute(
            f"SELECT hour, intensity {_RANGE} ORDER BY hour", (zone, str(signal), start, end)
        )
        index = pd.DatetimeIndex([hour for hour, _ in rows], tz="UTC")
        return pd.Series([value for _, value in rows], index=index, dtype=float, name=zone)

    async def sources(
        self, zone: str, signal: Signal, start: datetime, end: datetime
    ) -> dict[str, int]:
        """How many stored hours of ``[start, end)`` each source gave."""
        rows = await self._execute(
            f"SELECT source, count(*) {_RANGE} GROUP BY source", (zone, str(signal), start, end)
        )
        return {source: int(count) for source, count in rows}
