"""The platform's one PostgreSQL layer: a pool of autocommit connections that reconnects, driver
errors translated, and each owner's versioned schema (yoyo migrations).

Three owners build on :class:`Postgres`: telemetry's database, the knowledge base
(:class:`metatune.knowledge.store.KnowledgeStore`) and the forecaster's observation store. Each
keeps its own tables and migrations folder (:class:`Migrations`); the connection handling is here
once:

* every error that means "the database is not there" (refused, restarted, timed out, the pool
  exhausted) becomes :class:`~metatune.errors.DatabaseUnavailable`, whose message names the URL
  without its password, so callers retry or hold their work without knowing psycopg;
* connections are autocommit (transactions are explicit: ``async with conn.transaction()``) and
  checked before each lend, so a restarted database is reconnected to on the next call;
* ``schema``: a PostgreSQL schema of the instance's own (tests), created by :meth:`migrate`;
  otherwise the connection's search path;
* :meth:`migrate` applies the migrations not yet applied, under yoyo's lock (several processes
  may start at once), and is safe to call at every start. It leaves no ``ERROR`` line in
  PostgreSQL's log (:func:`migration_backend`): yoyo's own backend writes three at every start
  (its lock table created again, its transactional-DDL probe, and a waiter's every try at the lock).

Usage::

    db = Postgres(url, migrations=Migrations("metatune_forecaster"))
    await db.migrate()
    rows = await db.fetch("SELECT zone, hour FROM intensity_observations WHERE zone = %s", ("DE",))
    async with db.connection() as conn, conn.transaction():
        ...
    await db.close()
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, Self
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.abc import QueryNoTemplate
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .errors import ConfigurationError, DatabaseUnavailable
from .redaction import redact, redact_url

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# the driver's and the pool's ways of saying the database is not there
UNAVAILABLE = (psycopg.OperationalError, psycopg.errors.AdminShutdown, PoolTimeout)
# a transaction PostgreSQL rolled back for its own reasons (SQLSTATE class 40): worth running again
ROLLED_BACK = (
    psycopg.errors.TransactionRollback,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
)
MIGRATION_LOCK_S = 60  # how long a process waits for another's migrations
# a session lock per schema that a waiter polls for (pg_try_advisory_lock fails without an error)
MIGRATION_LOCK_KEY = "hashtext('metatune.migrations.' || current_schema())"
TRY_LOCK = f"SELECT pg_try_advisory_lock({MIGRATION_LOCK_KEY})"
UNLOCK = f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})"


@dataclass(frozen=True)
class Migrations:
    """Where an owner's yoyo migrations live: a folder of a Python package."""

    package: str
    folder: str = "migrations"


@functools.cache
def migration_backend() -> type[Any]:
    """yoyo's psycopg 3 backend, made quiet in PostgreSQL's log, where yoyo's writes an ``ERROR``
    line for each of: creating its lock table when it exists, its probe of whether DDL is
    transactional (a table created, rolled back, then dropped: "does not exist"; PostgreSQL's DDL
    is transactional), and each try at its lock while another process holds it (an INSERT that
    violates the lock table's key, every 0.5 s). Here the table is created ``IF NOT EXISTS``, the
    probe is not run, and a process first takes a PostgreSQL advisory lock of the schema, polled
    without errors, then yoyo's own (free by then; a process of an older version still sees it)."""
    from yoyo.backends.core.postgresql import PostgresqlPsycopgBackend
    from yoyo.exceptions import LockTimeout

    class QuietPostgresBackend(PostgresqlPsycopgBackend):
        create_lock_table_sql = PostgresqlPsycopgBackend.create_lock_table_sql.replace(
            "CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1
        )

        def _check_transactional_ddl(self) -> bool:
            return True

        @contextmanager
        def lock(self, timeout: float = 10) -> Iterator[None]:
            if self._is_locked:  # yoyo's re-entry: its own methods lock again
                yield
                return
            started = time.monotonic()
            while not self.execute(TRY_LOCK).fetchone()[0]:
                if timeout and time.monotonic() > started + timeout:
                    raise LockTimeout("another process is migrating this schema")
                time.sleep(min(0.5, timeout or 0.5))
            try:
                with super().lock(timeout):
                    yield
            finally:
                self.execute(UNLOCK)

    return QuietPostgresBackend


def yoyo_uri(url: str, schema: str | None = None, connect_timeout_s: float | None = None) -> str:
    """``url`` as yoyo wants it: its psycopg 3 backend, the schema as a ``schema`` argument."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "postgresql+psycopg"):
        raise ConfigurationError(
            f"METATUNE_DATABASE_URL must be a postgresql:// URL, not {redact_url(url)!r}"
        )
    query = dict(parse_qsl(parts.query))
    if schema:
        query["schema"] = schema
    if connect_timeout_s and "connect_timeout" not in query:
        query["connect_timeout"] = str(max(1, round(connect_timeout_s)))
    return urlunsplit(
        ("postgresql+psycopg", parts.netloc, parts.path, urlencode(query), parts.fragment)
    )


class Postgres:
    """A lazily opened pool over ``url`` and the owner's migrations (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        migrations: Migrations,
        schema: str | None = None,
        max_size: int = 4,
        connect_timeout_s: float = 2.0,
        name: str = "metatune",
        wait_s: float | None = None,
        reconnect_timeout_s: float = 0.0,
    ) -> None:
        """``wait_s``: how long a caller waits for a connection (default twice the connect
        timeout, at least 3 s); ``reconnect_timeout_s``: how long the pool keeps re-opening a
        connection it lost in the background (0: it opens a new one when one is next needed)."""
        if schema is not None and not SCHEMA_NAME.match(schema):
            raise ConfigurationError(
                f"schema name {schema!r}: lower-case letters, digits and _ only"
            )
        self.url = url
        self.schema = schema
        self.migrations = migrations
        self.max_size = max_size
        self.connect_timeout_s = connect_timeout_s
        self.name = name
        self.wait_s = wait_s if wait_s is not None else max(3.0, 2 * connect_timeout_s)
        self.reconnect_timeout_s = reconnect_timeout_s
        self._pool: AsyncConnectionPool | None = None
        self._opening = asyncio.Lock()

    def unavailable(self, exc: BaseException) -> DatabaseUnavailable:
        """``exc`` as the platform's outage error, the URL and message without secrets."""
        return DatabaseUnavailable(redact_url(self.url), redact(str(exc).strip()))

    def connect_kwargs(self) -> dict[str, Any]:
        """psycopg's connection arguments: autocommit, the timeout, the schema's search path."""
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(self.connect_timeout_s)),
        }
        if self.schema:
            kwargs["options"] = f"-c search_path={self.schema}"
        return kwargs

    async def pool(self) -> AsyncConnectionPool:
        """The pool, opened on first use (one connection at least, or DatabaseUnavailable)."""
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    pool = AsyncConnectionPool(
                        self.url,
                        kwargs=self.connect_kwargs(),
                        min_size=1,
                        max_size=self.max_size,
                        open=False,
                        check=AsyncConnectionPool.check_connection,
                        timeout=self.wait_s,
                        reconnect_timeout=self.reconnect_timeout_s,
                        name=self.name,
                    )
                    try:
                        await pool.open(wait=True, timeout=self.wait_s)
                    except PoolTimeout as exc:
                        await pool.close()
                        raise self.unavailable(exc) from exc
                    self._pool = pool
        return self._pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection; database outages surface as :class:`DatabaseUnavailable`. A
        transaction PostgreSQL rolled back for a deadlock or a serialization failure is no outage
        (psycopg files it under OperationalError too): it propagates as itself, for the caller
        to run the transaction again."""
        pool = await self.pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except ROLLED_BACK:
            raise
        except UNAVAILABLE as exc:
            raise self.unavailable(exc) from exc

    async def fetch(self, query: QueryNoTemplate, params: Any = ()) -> list[tuple[Any, ...]]:
        """Rows as tuples (none for a statement that returns nothing)."""
        async with self.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def fetch_dicts(self, query: QueryNoTemplate, params: Any = ()) -> list[dict[str, Any]]:
        """Rows as dicts keyed by column name."""
        async with self.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(query, params)
            return await cur.fetchall() if cur.description else []

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ----------------------------------------------------------------- schema
    async def migrate(self) -> list[str]:
        """Apply the migrations not yet applied (safe at every start, from several processes:
        yoyo's lock serialises them); returns the ids applied now."""
        if self.schema:
            await self._execute_once(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
        return await asyncio.to_thread(self._migrate_sync)

    async def drop_schema(self) -> None:
        """Drop this instance's own schema and everything in it (tests)."""
        if self.schema is None:
            raise ConfigurationError("drop_schema() needs an instance created with its own schema")
        await self.close()
        await self._execute_once(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
        )

    async def _execute_once(self, statement: sql.Composed) -> None:
        """One statement on a connection of its own, outside the pool and its search path."""
        try:
            async with await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout_s))
            ) as conn:
                await conn.execute(statement)
        except UNAVAILABLE as exc:
            raise self.unavailable(exc) from exc

    def _migrate_sync(self) -> list[str]:
        from yoyo import default_migration_table, read_migrations
        from yoyo.connections import parse_uri
        from yoyo.exceptions import LockTimeout

        uri = yoyo_uri(self.url, self.schema, self.connect_timeout_s)
        backend = None
        for attempt in range(3):  # two processes creating yoyo's own tables at once: one retries
            try:
                backend = migration_backend()(parse_uri(uri), default_migration_table)
                backend.init_database()
                break
            except psycopg.OperationalError as exc:
                raise self.unavailable(exc) from exc
            except psycopg.Error:
                if attempt == 2:
                    raise
        assert backend is not None
        try:
            folder = resources.files(self.migrations.package).joinpath(self.migrations.folder)
            with resources.as_file(folder) as path:
                migrations = read_migrations(str(path))
                try:
                    with backend.lock(timeout=MIGRATION_LOCK_S):
                        todo = backend.to_apply(migrations)
                        backend.apply_migrations(todo)
                except LockTimeout as exc:
                    raise DatabaseUnavailable(
                        redact_url(self.url),
                        f"another process held the migrations' lock for {MIGRATION_LOCK_S} s",
                    ) from exc
                return [migration.id for migration in todo]
        finally:
            backend.connection.close()


__all__ = ["ROLLED_BACK", "SCHEMA_NAME", "UNAVAILABLE", "Migrations", "Postgres", "yoyo_uri"]
