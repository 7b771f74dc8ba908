"""Fixtures of the recommender's tests: a migrated knowledge base of each test's own."""

from __future__ import annotations

from tests.support.databases import store

__all__ = ["store"]
