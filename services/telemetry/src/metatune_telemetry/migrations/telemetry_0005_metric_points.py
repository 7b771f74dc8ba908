"""``run_metrics`` holds one row per optimizer step, not one per progress event.

A progress event carries the steps since the previous one (``RunProgress.points``), each stored
as its own row beside the event's row:

* The key becomes ``(job_id, time, step)``: a step of a job at an instant is stored once, however
  many events carry it (a redelivered event adds no rows in any case: only new events add typed
  rows). ``time`` stays in the key because a partitioned table (or hypertable) keys by its
  partition column; a step trained again after a resume from an older checkpoint is a new row at
  its new time. The key also serves the loss-curve query by ``(job_id, time)``, so the separate
  ``run_metrics_job`` index goes (one B-tree per row instead of two, and no B-tree on random
  event ids).
* The accounting columns (``power_w``, ``tokens_seen``, ``tokens_with_padding``, ``energy_wh``)
  may be NULL: a point row has no power or energy of its own (the event's accounting is
  cumulative and lands on the event's row).

Rows stored before keep their values; of rows sharing (job, time, step), which only two events
of the same job, instant and step could have written, one is kept (the raw events stay in
``event_log``). Roll back: the point rows go (the events' own rows stay, one per event) and the
old key and index come back.
"""

from yoyo import step

__depends__ = {"telemetry_0004_predictions"}

NULLABLE = ("power_w", "tokens_seen", "tokens_with_padding", "energy_wh")


def _mode(cursor) -> str:
    cursor.execute("SELECT mode FROM telemetry_mode")
    return cursor.fetchone()[0]


def _rekey(cursor, key: str) -> None:
    cursor.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = 'run_metrics'::regclass AND contype = 'p'"
    )
    for (name,) in cursor.fetchall():
        cursor.execute(f'ALTER TABLE run_metrics DROP CONSTRAINT "{name}"')
    cursor.execute(f"ALTER TABLE run_metrics ADD PRIMARY KEY ({key})")


def _uncompressed(cursor, change) -> None:
    """``change`` on ``run_metrics``; TimescaleDB cannot change keys or columns of a compressed
    hypertable, so its branch decompresses first and restores compression and the policy."""
    timescale = _mode(cursor) == "timescaledb"
    if timescale:
        cursor.execute("SELECT remove_compression_policy('run_metrics', if_exists => TRUE)")
        cursor.execute(
            "SELECT decompress_chunk(c, if_compressed => TRUE) FROM show_chunks('run_metrics') c"
        )
        cursor.execute("ALTER TABLE run_metrics SET (timescaledb.compress = false)")
    change(cursor)
    if timescale:
        cursor.execute(
            "ALTER TABLE run_metrics SET (timescaledb.compress, timescaledb.compress_segmentby = 'job_id')"
        )
        cursor.execute(
            "SELECT add_compression_policy('run_metrics', INTERVAL '7 days', if_not_exists => TRUE)"
        )


def _to_points(cursor) -> None:
    cursor.execute(
        "DELETE FROM run_metrics a USING run_metrics b WHERE a.job_id = b.job_id "
        "AND a.time = b.time AND a.step = b.step AND a.event_id > b.event_id"
    )
    _rekey(cursor, "job_id, time, step")
    cursor.execute("DROP INDEX IF EXISTS run_metrics_job")
    for column in NULLABLE:
        cursor.execute(f"ALTER TABLE run_metrics ALTER COLUMN {column} DROP NOT NULL")


def _to_events(cursor) -> None:
    cursor.execute(
        "DELETE FROM run_metrics WHERE " + " OR ".join(f"{column} IS NULL" for column in NULLABLE)
    )
    for column in NULLABLE:
        cursor.execute(f"ALTER TABLE run_metrics ALTER COLUMN {column} SET NOT NULL")
    _rekey(cursor, "event_id, time")
    cursor.execute("CREATE INDEX IF NOT EXISTS run_metrics_job ON run_metrics (job_id, time)")


def apply(conn) -> None:
    _uncompressed(conn.cursor(), _to_points)


def rollback(conn) -> None:
    _uncompressed(conn.cursor(), _to_events)


steps = [step(apply, rollback)]
