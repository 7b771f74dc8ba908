"""Cheaper ingestion of the event log, measured with ``bench/telemetry_bench.py`` (README).

* ``payload`` becomes ``json`` (the text as published, checked for syntax) instead of ``jsonb``:
  building the binary ``jsonb`` form was the largest single server cost per message, and the log
  is an audit record read by ``event_id`` or time, never searched inside; ``->`` / ``->>`` work
  on ``json`` alike, and ``payload::jsonb`` gives the rest at query time.
* The ``subject`` and ``correlation_id`` B-trees skip training-metric events
  (``metatune.runs.<job>.progress``, the bulk of the log): those are reached through
  ``run_metrics (job_id, time)`` and its ``event_id``. Queries that want these indexes repeat
  their predicate (``NON_METRIC``).
* A BRIN index on ``stored_at`` (insertion order, so BRIN is exact enough and nearly free) serves
  the ingestion-lag panel.

Both modes: TimescaleDB cannot change a column type while compression is on, so its branch
decompresses, changes the type and restores compression and the policy.
"""

from yoyo import step

__depends__ = {"telemetry_0002_timeseries"}

NON_METRIC = "subject NOT LIKE 'metatune.runs.%.progress'"
NEW_INDEXES = [
    f"CREATE INDEX IF NOT EXISTS event_log_subject_nonmetric ON event_log (subject, occurred_at) WHERE {NON_METRIC}",
    (
        f"CREATE INDEX IF NOT EXISTS event_log_correlation_nonmetric ON event_log (correlation_id, occurred_at) "
        f"WHERE {NON_METRIC}"
    ),
    "CREATE INDEX IF NOT EXISTS event_log_stored_brin ON event_log USING brin (stored_at)",
]
OLD_INDEXES = [
    "CREATE INDEX IF NOT EXISTS event_log_subject ON event_log (subject, occurred_at)",
    "CREATE INDEX IF NOT EXISTS event_log_correlation ON event_log (correlation_id)",
]


def _mode(cursor) -> str:
    cursor.execute("SELECT mode FROM telemetry_mode")
    return cursor.fetchone()[0]


def _payload_type(cursor, pg_type: str) -> None:
    alter = f"ALTER TABLE event_log ALTER COLUMN payload TYPE {pg_type} USING payload::{pg_type}"
    if _mode(cursor) != "timescaledb":
        cursor.execute(alter)
        return
    cursor.execute("SELECT remove_compression_policy('event_log', if_exists => TRUE)")
    cursor.execute(
        "SELECT decompress_chunk(c, if_compressed => TRUE) FROM show_chunks('event_log') c"
    )
    cursor.execute("ALTER TABLE event_log SET (timescaledb.compress = false)")
    cursor.execute(alter)
    cursor.execute(
        "ALTER TABLE event_log SET (timescaledb.compress, timescaledb.compress_segmentby = 'subject')"
    )
    cursor.execute(
        "SELECT add_compression_policy('event_log', INTERVAL '30 days', if_not_exists => TRUE)"
    )


def apply(conn) -> None:
    cursor = conn.cursor()
    _payload_type(cursor, "json")
    cursor.execute("DROP INDEX IF EXISTS event_log_subject, event_log_correlation")
    for index in NEW_INDEXES:
        cursor.execute(index)


def rollback(conn) -> None:
    cursor = conn.cursor()
    cursor.execute(
        "DROP INDEX IF EXISTS event_log_subject_nonmetric, event_log_correlation_nonmetric, "
        "event_log_stored_brin"
    )
    for index in OLD_INDEXES:
        cursor.execute(index)
    _payload_type(cursor, "jsonb")


steps = [step(apply, rollback)]
