"""A stand-in for an external grid-data provider: an :class:`IntensitySource` that serves the real
2023 hourly trace of one zone from the replay extract the forecaster ships
(``data/replay.parquet``, read here with pandas, not through the replay adapter), and records
every window it was asked for. Plus the observation store of one test, in its own schema, and
the CLI's settings pointed at such a schema."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from functools import cache

import pandas as pd
import psycopg
import pytest

from metatune.settings import Settings, get_settings
from metatune_forecaster.adapters.package_data import REPLAY_PATH
from metatune_forecaster.adapters.store import ObservationStore
from metatune_forecaster.domain.providers import EmissionFactors, ProviderUnavailable, Signal


@cache
def trace(region: str) -> pd.Series:
    """The observed intensity of ``region`` in 2023, hourly, UTC."""
    extract = pd.read_parquet(REPLAY_PATH)
    rows = extract[extract["region"] == region]
    index = pd.DatetimeIndex(pd.to_datetime(rows["datetime_utc"], utc=True))
    return pd.Series(rows["ci_g_per_kwh"].to_numpy(dtype=float), index=index).sort_index()


class TraceSource:
    """Serves ``trace(zone)`` from ``available_from`` on; ``own`` is its own forecast (None: it
    publishes none); ``down`` (an error) makes every request fail with it, as an outage does."""

    name = "test-provider"
    factors = EmissionFactors.direct

    def __init__(
        self,
        signal: Signal = Signal.average,
        available_from: datetime | None = None,
        own: pd.Series | None = None,
    ) -> None:
        self.signal = signal
        self.available_from = available_from
        self.own = own
        self.down: ProviderUnavailable | None = None
        self.asked: list[tuple[pd.Timestamp, pd.Timestamp]] = []

    async def observed(self, zone: str, start: datetime, end: datetime) -> pd.Series:
        if self.down is not None:
            raise self.down
        self.asked.append((pd.Timestamp(start), pd.Timestamp(end)))
        series = trace(zone)
        first = (
            pd.Timestamp(start)
            if self.available_from is None
            else max(pd.Timestamp(start), pd.Timestamp(self.available_from))
        )
        return series[(series.index >= first) & (series.index < pd.Timestamp(end))]

    async def forecast(self, zone: str, issue: datetime, hours: int) -> pd.Series | None:
        if self.down is not None:
            raise self.down
        return self.own

    def hours_asked(self) -> int:
        return sum(int((end - start) / pd.Timedelta(hours=1)) for start, end in self.asked)


def drop_schema(name: str) -> None:
    with psycopg.connect(Settings().database_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
async def store() -> AsyncIterator[ObservationStore]:
    """A migrated observation store in a schema of this test alone, dropped afterwards."""
    schema = f"fc_t_{uuid.uuid4().hex[:10]}"
    observations = ObservationStore(Settings().database_url, schema=schema)
    await observations.migrate()
    try:
        yield observations
    finally:
        await observations.close()
        drop_schema(schema)


@pytest.fixture
def cli_db(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The CLI's settings pointed at a schema of this test alone (through the URL's options)."""
    schema = f"fc_t_{uuid.uuid4().hex[:10]}"
    base = Settings().database_url
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in base else "?"
    monkeypatch.setenv(
        "METATUNE_DATABASE_URL", f"{base}{separator}options=-c%20search_path%3D{schema}"
    )
    get_settings.cache_clear()
    yield schema
    get_settings.cache_clear()
    drop_schema(schema)
