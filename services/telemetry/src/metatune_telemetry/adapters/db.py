"""The telemetry database: the platform's PostgreSQL layer (:mod:`metatune.postgres`) over
telemetry's own migrations, and the storage mode they chose.

Every driver error that means "the database is not there" (refused, restarted, timed out) is a
:class:`~metatune.errors.DatabaseUnavailable`, which the consumer answers by holding its batch
un-acked until the database is back. ``schema``: a PostgreSQL schema of its own (tests);
otherwise the connection's default.
"""

from __future__ import annotations

import logging

from metatune.postgres import Migrations, Postgres

log = logging.getLogger("metatune.telemetry.db")
MIGRATIONS = Migrations("metatune_telemetry")


class Database(Postgres):
    """Telemetry's pool (autocommit connections, transactions explicit) and schema, with the
    storage mode ``telemetry_0002`` recorded: ``timescaledb`` or ``postgresql``."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        max_size: int = 4,
        connect_timeout_s: float = 2.0,
    ) -> None:
        super().__init__(
            url,
            migrations=MIGRATIONS,
            schema=schema,
            max_size=max_size,
            connect_timeout_s=connect_timeout_s,
            name="metatune-telemetry",
        )
        self.mode: str | None = None

    async def migrate(self) -> list[str]:
        """Apply the migrations not yet applied, then read the active mode once and log it."""
        applied = await super().migrate()
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


__all__ = ["MIGRATIONS", "Database"]
