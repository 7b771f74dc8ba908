"""The telemetry database: a connection pool that reconnects, and the versioned migrations.

Every driver error that means "the database is not there" (refused, restarted, timed out) is
translated into :class:`~metatune.errors.DatabaseUnavailable`, which the consumer answers by
holding its batch un-acked until the database is back. ``schema``: a PostgreSQL schema of its own
(tests); otherwise the connection's default.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.abc import QueryNoTemplate
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from metatune.errors import ConfigurationError, DatabaseUnavailable
from metatune.redaction import redact, redact_url

log = logging.getLogger("metatune.telemetry.db")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
UNAVAILABLE = (psycopg.OperationalError, psycopg.errors.AdminShutdown, PoolTimeout)


def yoyo_uri(url: str, schema: str | None) -> str:
    """``url`` as yoyo wants it: its psycopg 3 backend and the schema as an argument."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "postgresql+psycopg"):
        raise ConfigurationError(
            f"METATUNE_DATABASE_URL must be a postgresql:// URL, not {redact_url(url)!r}"
        )
    query = dict(parse_qsl(parts.query))
    if schema:
        query["schema"] = schema
    return urlunsplit(
        ("postgresql+psycopg", parts.netloc, parts.path, urlencode(query), parts.fragment)
    )


class Database:
    """A pool of autocommit connections (transactions are explicit) checked before each lend."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        max_size: int = 4,
        connect_timeout_s: float = 2.0,
    ) -> None:
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise ConfigurationError(
                f"schema name {schema!r}: lower-case letters, digits and _ only"
            )
        self.url = url
        self.schema = schema
        self.max_size = max_size
        self.connect_timeout_s = connect_timeout_s
        self.mode: str | None = None
        self._pool: AsyncConnectionPool | None = None
        self._opening = asyncio.Lock()

    def unavailable(self, exc: BaseException) -> DatabaseUnavailable:
        return DatabaseUnavailable(redact_url(self.url), redact(str(exc).strip()))

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(self.connect_timeout_s)),
        }
        if self.schema:
            kwargs["options"] = f"-c search_path={self.schema}"
        return kwargs

    async def pool(self) -> AsyncConnectionPool:
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    pool = AsyncConnectionPool(
                        self.url,
                        kwargs=self._kwargs(),
                        min_size=1,
                        max_size=self.max_size,
                        open=False,
                        check=AsyncConnectionPool.check_connection,
                        timeout=max(3.0, 2 * self.connect_timeout_s),
                        reconnect_timeout=0,
                        name="metatune-telemetry",
                    )
                    try:
                        await pool.open(wait=True, timeout=max(3.0, 2 * self.connect_timeout_s))
                    except PoolTimeout as exc:
                        await pool.close()
                        raise self.unavailable(exc) from exc
                    self._pool = pool
        return self._pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection; database outages surface as :class:`DatabaseUnavailable`."""
        pool = await self.pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except UNAVAILABLE as exc:
            raise self.unavailable(exc) from exc

    async def fetch(self, query: QueryNoTemplate, params: Any = ()) -> list[tuple[Any, ...]]:
        async with self.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def fetch_dicts(self, query: QueryNoTemplate, params: Any = ()) -> list[dict[str, Any]]:
        from psycopg.rows import dict_row

        async with self.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # ----------------------------------------------------------------- schema
    async def migrate(self) -> list[str]:
        """Apply the migrations not yet applied (re-runnable; yoyo's lock serialises processes);
        then read the active mode once and log it. Returns the ids applied now."""
        if self.schema:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, **self._kwargs()
                ) as conn:
                    await conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self.schema)
                        )
                    )
            except UNAVAILABLE as exc:
                raise self.unavailable(exc) from exc
        applied = await asyncio.to_thread(self._migrate_sync)
        await self.load_mode()
        log.info(
            "telemetry storage mode: %s%s",
            self.mode,
            "" if self.mode == "timescaledb" else " (partitions + BRIN, date_bin rollup tables)",
        )
        return applied

    async def load_mode(self) -> str:
        """The storage mode ``telemetry_0002`` recorded (a writer process reads it; it does not migrate)."""
        rows = await self.fetch("SELECT mode FROM telemetry_mode")
        self.mode = rows[0][0]
        return self.mode

    def _migrate_sync(self) -> list[str]:
        from yoyo import get_backend, read_migrations

        try:
            backend = get_backend(yoyo_uri(self.url, self.schema))
        except psycopg.OperationalError as exc:
            raise self.unavailable(exc) from exc
        try:
            with resources.as_file(
                resources.files("metatune_telemetry").joinpath("migrations")
            ) as folder:
                migrations = read_migrations(str(folder))
                with backend.lock(timeout=60):
                    todo = backend.to_apply(migrations)
                    backend.apply_migrations(todo)
                return [m.id for m in todo]
        finally:
            backend.connection.close()
