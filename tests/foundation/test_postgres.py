"""The platform's PostgreSQL layer (:mod:`metatune.postgres`) against the real server: an outage
is a ``DatabaseUnavailable`` naming the URL without its password, while a transaction PostgreSQL
rolls back for a deadlock stays itself, so a caller runs it again instead of waiting out an
outage that is not there."""

from __future__ import annotations

import psycopg
import pytest

from metatune.errors import DatabaseUnavailable
from metatune.postgres import Migrations, Postgres
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
