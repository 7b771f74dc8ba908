"""The observation store: the hourly intensity the forecaster has observed, per zone and signal,
in PostgreSQL (a TimescaleDB hypertable where the extension loads).

The forecaster owns the table (``migrations/forecaster_0001_observations.py``, applied by yoyo
like the knowledge base's and telemetry's). Writes are idempotent upserts keyed by (zone, signal,
hour): storing the same hours again changes nothing, a revised value replaces the old one. Each
row records the emission factors of its value (``factors``, direct unless told); reads return
only the hours of the factors asked for (a deployment's, ``METATUNE_EMISSION_FACTORS``). A
database that does not answer is a :class:`~metatune.errors.DatabaseUnavailable`, whose message
names the URL without its password.

Usage::

    async with ObservationStore(settings.database_url) as store:
        await store.migrate()
        await store.upsert("DE", Signal.average, "electricity-maps", series)
        history = await store.observed("DE", Signal.average, start, end)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from metatune.postgres import Migrations, Postgres

from ..domain.observations import hourly
from ..domain.providers import EmissionFactors, Signal

MIGRATIONS = Migrations("metatune_forecaster")

_UPSERT = """
INSERT INTO intensity_observations AS o (zone, signal, hour, intensity, source, factors, fetched_at)
SELECT %(zone)s, %(signal)s, t.hour, t.intensity, %(source)s, %(factors)s, %(fetched_at)s
  FROM unnest(%(hours)s::timestamptz[], %(values)s::float8[]) AS t(hour, intensity)
ON CONFLICT (zone, signal, hour) DO UPDATE
   SET intensity = EXCLUDED.intensity, source = EXCLUDED.source, factors = EXCLUDED.factors,
       fetched_at = EXCLUDED.fetched_at
 WHERE (o.intensity, o.source, o.factors)
       IS DISTINCT FROM (EXCLUDED.intensity, EXCLUDED.source, EXCLUDED.factors)
RETURNING (xmax = 0) AS inserted"""

_RANGE = (
    "FROM intensity_observations WHERE zone = %s AND signal = %s AND factors = %s "
    "AND hour >= %s AND hour < %s"
)


@dataclass(frozen=True)
class Upserted:
    """What one upsert did: hours new to the store, hours whose value (or source) changed."""

    new: int = 0
    changed: int = 0

    def __add__(self, other: Upserted) -> Upserted:
        return Upserted(self.new + other.new, self.changed + other.changed)


class ObservationStore(Postgres):
    """Async access to ``intensity_observations`` over the platform's PostgreSQL layer
    (:mod:`metatune.postgres`). ``schema``: a PostgreSQL schema of its own (tests), else the
    connection's search path."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        connect_timeout_s: float = 2.0,
        max_connections: int = 2,
    ) -> None:
        super().__init__(
            url,
            migrations=MIGRATIONS,
            schema=schema,
            max_size=max_connections,
            connect_timeout_s=connect_timeout_s,
            name="metatune-forecaster",
        )
        self._migrated = False

    async def migrate(self) -> list[str]:
        """Apply the forecaster's migrations not yet applied; returns the ids applied now."""
        applied = await super().migrate()
        self._migrated = True
        return applied

    async def ready(self) -> None:
        """Migrate once per process (the service calls it before its first read)."""
        if not self._migrated:
            await self.migrate()

    # ----------------------------------------------------------------- observations
    async def upsert(
        self,
        zone: str,
        signal: Signal,
        source: str,
        values: pd.Series,
        fetched_at: datetime | None = None,
        *,
        factors: EmissionFactors = EmissionFactors.direct,
    ) -> Upserted:
        """Store ``values`` (gCO2eq/kWh by hour, see :func:`hourly`) for ``zone``; idempotent."""
        series = hourly(values)
        if series.empty:
            return Upserted()
        rows = await self.fetch(
            _UPSERT,
            {
                "zone": zone,
                "signal": str(signal),
                "source": source,
                "factors": factors.value,
                "fetched_at": fetched_at or datetime.now(UTC),
                "hours": [ts.to_pydatetime() for ts in series.index],
                "values": series.tolist(),
            },
        )
        new = sum(1 for (inserted,) in rows if inserted)
        return Upserted(new=new, changed=len(rows) - new)

    async def observed(
        self,
        zone: str,
        signal: Signal,
        start: datetime,
        end: datetime,
        *,
        factors: EmissionFactors = EmissionFactors.direct,
    ) -> pd.Series:
        """The stored intensity of ``zone`` on ``[start, end)`` from ``factors``: hourly UTC index,
        stored hours only."""
        rows = await self.fetch(
            f"SELECT hour, intensity {_RANGE} ORDER BY hour",
            (zone, str(signal), factors.value, start, end),
        )
        index = pd.DatetimeIndex([hour for hour, _ in rows], tz="UTC")
        return pd.Series([value for _, value in rows], index=index, dtype=float, name=zone)

    async def sources(
        self,
        zone: str,
        signal: Signal,
        start: datetime,
        end: datetime,
        *,
        factors: EmissionFactors = EmissionFactors.direct,
    ) -> dict[str, int]:
        """How many stored hours of ``[start, end)`` (of ``factors``) each source gave."""
        rows = await self.fetch(
            f"SELECT source, count(*) {_RANGE} GROUP BY source",
            (zone, str(signal), factors.value, start, end),
        )
        return {source: int(count) for source, count in rows}
