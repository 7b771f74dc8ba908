"""Fixtures and helpers of the tests that need a schema of their own in the real PostgreSQL:
a migrated knowledge base (``store``), a bare schema name for telemetry (``schema``), and
``count``. Test folders re-export the fixtures they use from their conftest."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from metatune.knowledge.store import KnowledgeStore
from metatune.settings import Settings


@pytest.fixture
async def store() -> AsyncIterator[KnowledgeStore]:
    """A migrated knowledge base in a schema of this test alone, dropped afterwards."""
    kb = KnowledgeStore(Settings().database_url, schema=f"kb_t_{uuid.uuid4().hex[:10]}")
    await kb.migrate()
    try:
        yield kb
    finally:
        await kb.drop_schema()


@pytest.fixture
def schema() -> Iterator[str]:
    """A schema name of this test alone, dropped afterwards (whoever migrates into it)."""
    name = f"tm_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(Settings().database_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


async def count(db: Any, query: str, params: Any = ()) -> int:
    """The first column of the first row of ``query`` through a telemetry ``Database``."""
    return (await db.fetch(query, params))[0][0]
