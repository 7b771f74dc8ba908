"""Knowledge-base tests run against the real PostgreSQL, each in a schema of its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

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
