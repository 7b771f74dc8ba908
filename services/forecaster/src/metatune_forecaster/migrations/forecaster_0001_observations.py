"""The forecaster's observation store: one row per zone, signal and hour of observed intensity.

``(zone, signal, hour)`` is the key: a zone's average (location-based) and marginal intensities
are different quantities and never overwrite each other, while a later fetch or import of the same
hour replaces the value and records who gave it (``source``) and when (``fetched_at``). Where the
TimescaleDB extension can be created the table becomes a hypertable on ``hour`` (monthly chunks);
on plain PostgreSQL the primary key's index serves every query (by zone and signal, a range of
hours) and a BRIN index on ``hour`` keeps range scans over all zones cheap.
"""

from yoyo import step

__depends__: set[str] = set()

TABLE = """
CREATE TABLE IF NOT EXISTS intensity_observations (
    zone       text             NOT NULL,
    signal     text             NOT NULL CHECK (signal IN ('average', 'marginal')),
    hour       timestamptz      NOT NULL CHECK (date_trunc('hour', hour, 'UTC') = hour),
    intensity  double precision NOT NULL CHECK (intensity >= 0),
    source     text             NOT NULL,
    fetched_at timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (zone, signal, hour)
)"""


def _hypertable(cursor) -> bool:
    """Make the table a hypertable where the extension loads; False (plain table) otherwise."""
    cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb'")
    if cursor.fetchone() is None:
        return False
    cursor.execute("SAVEPOINT forecaster_tsdb")
    try:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
        cursor.execute(
            "SELECT create_hypertable('intensity_observations', 'hour', if_not_exists => TRUE, "
            "chunk_time_interval => INTERVAL '30 days')"
        )
    except Exception:  # listed but not loadable (not in shared_preload_libraries): a plain table
        cursor.execute("ROLLBACK TO SAVEPOINT forecaster_tsdb")
        return False
    cursor.execute("RELEASE SAVEPOINT forecaster_tsdb")
    return True


def apply(conn) -> None:
    cursor = conn.cursor()
    cursor.execute(TABLE)
    if not _hypertable(cursor):
        cursor.execute(
            "CREATE INDEX IF NOT EXISTS intensity_observations_brin "
            "ON intensity_observations USING brin (hour)"
        )


def rollback(conn) -> None:
    conn.cursor().execute("DROP TABLE IF EXISTS intensity_observations")


steps = [step(apply, rollback)]
