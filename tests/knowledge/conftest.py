"""Knowledge-base tests run against the real PostgreSQL, each in a schema of its own."""

from __future__ import annotations

from tests.support.databases import store

__all__ = ["store"]
