"""The platform's PostgreSQL layer (:mod:`metatune.postgres`) against the real server: an outage
is a ``DatabaseUnavailable`` naming the URL without its password, while a transaction PostgreSQL
rolls back for a deadlock stays itself, so a caller runs it again instead of waiting out an
outage that is not there."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import psycopg
import pytest
from yoyo import default_migration_table
from yoyo.connections import parse_uri
from yoyo.exceptions import LockTimeout

from metatune.errors import DatabaseUnavailable
from metatune.postgres import Migrations, Postgres, migration_backend, yoyo_uri
from metatune.settings import Settings
from tests.support.servers import free_port

pytestmark = pytest.mark.integration

NO_MIGRATIONS = Migrations("metatune.knowledge")  # never applied here
RAISE = "DO $$ BEGIN RAISE EXCEPTION 'chosen as the victim' USING ERRCODE = '{}'; END $$"


async def test_a_rolled_back_transaction_is_not_an_outage() -> None:
    async with Postgres(Settings().database_url, migrations=NO_MIGRATIONS) as db:
        for code, error in [
            ("40P01", psycopg.errors.DeadlockDetected),
            ("40001", psycopg.errors.SerializationFailure),
        ]:
            with pytest.raises(error):
                async with db.connection() as conn:
                    await conn.execute(RAISE.format(code))
        assert await db.fetch("SELECT 1") == [(1,)]  # the pool lends again


async def test_an_unreachable_server_is_one_outage_error_without_the_password() -> None:
    url = f"postgresql://metatune:s3cret@127.0.0.1:{free_port()}/test"
    db = Postgres(url, migrations=NO_MIGRATIONS, connect_timeout_s=1.0)
    with pytest.raises(DatabaseUnavailable) as raised:
        await db.fetch("SELECT 1")
    assert "s3cret" not in str(raised.value) and "127.0.0.1" in str(raised.value)
    await db.close()


def test_migrating_leaves_no_error_in_postgresqls_log() -> None:
    """What yoyo's own backend logs as ERROR at every start (its lock table created again, its
    transactional-DDL probe, a waiter's tries at the lock): each would reach the client as an
    error from the statement, so none may."""
    failed: list[str] = []

    class Recording(migration_backend()):  # type: ignore[misc]
        def execute(self, statement: str, params: Any = None) -> Any:
            try:
                return super().execute(statement, params)
            except self.DatabaseError:
                failed.append(" ".join(statement.split()))
                raise

    url = Settings().database_url
    schema = f"quiet_{uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    backends = []
    try:
        for _ in range(2):  # the second finds yoyo's tables made
            backend = Recording(parse_uri(yoyo_uri(url, schema)), default_migration_table)
            backend.init_database()
            backends.append(backend)
        first, second = backends
        with first.lock(), pytest.raises(LockTimeout), second.lock(timeout=0.1):
            pass  # held by the first throughout: a waiter's tries
        with second.lock():  # free again
            pass
    finally:
        for backend in backends:
            backend.connection.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    assert failed == []
