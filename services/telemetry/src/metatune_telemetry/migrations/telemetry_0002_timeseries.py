"""Time-series tables, in the mode the database supports (decided once, recorded in telemetry_mode).

* ``timescaledb`` (the extension is available): hypertables, continuous aggregates for hourly
  energy and emissions per job and per datacenter, compression and retention policies.
* ``postgresql`` (declared fallback, as on the development machines): monthly range partitions
  (created on demand by ``telemetry_ensure_partition``) with BRIN indexes on time, and the same
  two hourly rollups as tables that ``telemetry_refresh_rollups(from, to)`` recomputes with
  ``date_bin`` (the writer calls it for the hours each batch touched).

Either way the rollups are named ``energy_hourly_job`` and ``energy_hourly_datacenter`` and have
the same columns, so queries, the report and Grafana do not care which mode is active.
"""

from yoyo import step

__depends__ = {"telemetry_0001_base"}

# (table, columns, primary key, time column)
TABLES = [
    (
        "event_log",
        """
        occurred_at    timestamptz NOT NULL,
        event_id       uuid        NOT NULL,
        subject        text        NOT NULL,
        correlation_id text,
        stream         text        NOT NULL,
        stream_seq     bigint      NOT NULL,
        payload        jsonb       NOT NULL,
        raw            bytea,
        stored_at      timestamptz NOT NULL DEFAULT now()""",
        "event_id, occurred_at",
        "occurred_at",
    ),
    (
        "run_metrics",
        """
        time                timestamptz NOT NULL,
        event_id            uuid        NOT NULL,
        job_id              uuid        NOT NULL,
        datacenter          text        NOT NULL,
        step                integer     NOT NULL,
        total_steps         integer     NOT NULL,
        train_loss          double precision,
        val_loss            double precision,
        learning_rate       double precision,
        power_w             double precision NOT NULL,
        step_time_s         double precision,
        tokens_seen         bigint      NOT NULL,
        tokens_with_padding bigint      NOT NULL,
        energy_wh           double precision NOT NULL""",
        "event_id, time",
        "time",
    ),
    (
        "forecast_points",
        """
        hour          timestamptz NOT NULL,
        region        text        NOT NULL,
        issued_at     timestamptz NOT NULL,
        g_per_kwh     double precision NOT NULL,
        p10_g_per_kwh double precision NOT NULL,
        p90_g_per_kwh double precision NOT NULL,
        model_version text        NOT NULL,
        stale         boolean     NOT NULL,
        imputed       boolean     NOT NULL""",
        "region, issued_at, hour",
        "hour",
    ),
    (
        "agent_status",
        """
        time            timestamptz NOT NULL,
        event_id        uuid        NOT NULL,
        datacenter      text        NOT NULL,
        region          text        NOT NULL,
        gpus_total      integer     NOT NULL,
        gpus_free       integer     NOT NULL,
        gpu_model       text        NOT NULL,
        power_per_gpu_w double precision NOT NULL,
        pue             double precision NOT NULL,
        running_jobs    integer     NOT NULL""",
        "event_id, time",
        "time",
    ),
    # Energy and emissions per job, clock hour and datacenter, from the latest accounting of the
    # run (each progress event carries every hour so far). emissions_g is NULL where no intensity
    # was known: unpriced, never 0.
    (
        "job_energy",
        """
        hour        timestamptz NOT NULL,
        job_id      uuid        NOT NULL,
        datacenter  text        NOT NULL,
        pue         double precision NOT NULL,
        energy_wh   double precision NOT NULL,
        g_per_kwh   double precision,
        emissions_g double precision,
        source_at   timestamptz NOT NULL""",
        "job_id, hour, datacenter",
        "hour",
    ),
]

INDEXES = [
    "CREATE INDEX IF NOT EXISTS event_log_subject ON event_log (subject, occurred_at)",
    "CREATE INDEX IF NOT EXISTS event_log_correlation ON event_log (correlation_id)",
    "CREATE INDEX IF NOT EXISTS run_metrics_job ON run_metrics (job_id, time)",
    "CREATE INDEX IF NOT EXISTS agent_status_dc ON agent_status (datacenter, time)",
    "CREATE INDEX IF NOT EXISTS forecast_points_region ON forecast_points (region, hour)",
]

ROLLUP_SELECT_JOB = """
    SELECT {bucket} AS bucket, job_id,
           sum(energy_wh) AS energy_wh,
           sum(energy_wh * pue) AS facility_energy_wh,
           sum(emissions_g) AS emissions_g,
           sum(CASE WHEN emissions_g IS NULL THEN energy_wh * pue ELSE 0 END) AS unpriced_energy_wh
    FROM job_energy {where} GROUP BY 1, 2"""
ROLLUP_SELECT_DC = """
    SELECT {bucket} AS bucket, datacenter,
           sum(energy_wh) AS energy_wh,
           sum(energy_wh * pue) AS facility_energy_wh,
           sum(emissions_g) AS emissions_g,
           sum(CASE WHEN emissions_g IS NULL THEN energy_wh * pue ELSE 0 END) AS unpriced_energy_wh,
           count(DISTINCT job_id) AS jobs
    FROM job_energy {where} GROUP BY 1, 2"""


def _timescale_available(cursor) -> bool:
    cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb'")
    if cursor.fetchone() is None:
        return False
    cursor.execute("SAVEPOINT telemetry_tsdb")
    try:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
        cursor.execute("RELEASE SAVEPOINT telemetry_tsdb")
        return True
    except Exception:  # listed but not loadable (not in shared_preload_libraries): the fallback
        cursor.execute("ROLLBACK TO SAVEPOINT telemetry_tsdb")
        return False


def _apply_timescaledb(cursor) -> None:
    for name, columns, key, time_column in TABLES:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns}, PRIMARY KEY ({key}))")
        cursor.execute(
            f"SELECT create_hypertable('{name}', '{time_column}', if_not_exists => TRUE, "
            f"chunk_time_interval => INTERVAL '7 days')"
        )
    for index in INDEXES:
        cursor.execute(index)
    for name, segment_by, after in (
        ("event_log", "subject", "30 days"),
        ("run_metrics", "job_id", "7 days"),
        ("agent_status", "datacenter", "2 days"),
        ("forecast_points", "region", "14 days"),
    ):
        cursor.execute(
            f"ALTER TABLE {name} SET (timescaledb.compress, timescaledb.compress_segmentby = '{segment_by}')"
        )
        cursor.execute(
            f"SELECT add_compression_policy('{name}', INTERVAL '{after}', if_not_exists => TRUE)"
        )
    cursor.execute(
        "SELECT add_retention_policy('agent_status', INTERVAL '90 days', if_not_exists => TRUE)"
    )
    for view, select in (
        ("energy_hourly_job", ROLLUP_SELECT_JOB),
        ("energy_hourly_datacenter", ROLLUP_SELECT_DC),
    ):
        cursor.execute(
            f"CREATE MATERIALIZED VIEW IF NOT EXISTS {view} WITH (timescaledb.continuous, "
            f"timescaledb.materialized_only = false) AS "
            + select.format(bucket="time_bucket(INTERVAL '1 hour', hour)", where="")
            + " WITH NO DATA"
        )
        cursor.execute(
            f"SELECT add_continuous_aggregate_policy('{view}', start_offset => INTERVAL '30 days', "
            f"end_offset => INTERVAL '1 hour', schedule_interval => INTERVAL '15 minutes', "
            f"if_not_exists => TRUE)"
        )
    # Real-time aggregation makes the views exact already; the function exists in both modes.
    cursor.execute(
        "CREATE OR REPLACE FUNCTION telemetry_refresh_rollups(from_ts timestamptz, to_ts timestamptz) "
        "RETURNS void LANGUAGE sql AS $$ SELECT $$"
    )
    cursor.execute(
        "CREATE OR REPLACE FUNCTION telemetry_ensure_partition(parent text, ts timestamptz) "
        "RETURNS void LANGUAGE sql AS $$ SELECT $$"
    )


def _apply_postgresql(cursor) -> None:
    for name, columns, key, time_column in TABLES:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {name} ({columns}, PRIMARY KEY ({key})) "
            f"PARTITION BY RANGE ({time_column})"
        )
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {name}_default PARTITION OF {name} DEFAULT")
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {name}_brin ON {name} USING brin ({time_column})"
        )
    for index in INDEXES:
        cursor.execute(index)
    cursor.execute("""
        CREATE OR REPLACE FUNCTION telemetry_ensure_partition(parent text, ts timestamptz) RETURNS void
        LANGUAGE plpgsql AS $$
        DECLARE
            lo timestamptz := date_trunc('month', ts, 'UTC');
            part text := parent || '_p' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMM');
        BEGIN
            IF to_regclass(part) IS NULL THEN
                EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                               part, parent, lo, lo + INTERVAL '1 month');
            END IF;
        END $$""")
    cursor.execute("""
        CREATE TABLE IF NOT EXISTS energy_hourly_job (
            bucket timestamptz NOT NULL, job_id uuid NOT NULL,
            energy_wh double precision NOT NULL, facility_energy_wh double precision NOT NULL,
            emissions_g double precision, unpriced_energy_wh double precision NOT NULL,
            PRIMARY KEY (bucket, job_id))""")
    cursor.execute("""
        CREATE TABLE IF NOT EXISTS energy_hourly_datacenter (
            bucket timestamptz NOT NULL, datacenter text NOT NULL,
            energy_wh double precision NOT NULL, facility_energy_wh double precision NOT NULL,
            emissions_g double precision, unpriced_energy_wh double precision NOT NULL, jobs bigint NOT NULL,
            PRIMARY KEY (bucket, datacenter))""")
    bucket = "date_bin(INTERVAL '1 hour', hour, TIMESTAMPTZ '2000-01-01 00:00:00+00')"
    where = "WHERE hour >= date_bin(INTERVAL '1 hour', from_ts, TIMESTAMPTZ '2000-01-01 00:00:00+00') AND hour < to_ts"
    cursor.execute(f"""
        CREATE OR REPLACE FUNCTION telemetry_refresh_rollups(from_ts timestamptz, to_ts timestamptz) RETURNS void
        LANGUAGE sql AS $$
            DELETE FROM energy_hourly_job
             WHERE bucket >= date_bin(INTERVAL '1 hour', from_ts, TIMESTAMPTZ '2000-01-01 00:00:00+00') AND bucket < to_ts;
            INSERT INTO energy_hourly_job {ROLLUP_SELECT_JOB.format(bucket=bucket, where=where)};
            DELETE FROM energy_hourly_datacenter
             WHERE bucket >= date_bin(INTERVAL '1 hour', from_ts, TIMESTAMPTZ '2000-01-01 00:00:00+00') AND bucket < to_ts;
            INSERT INTO energy_hourly_datacenter {ROLLUP_SELECT_DC.format(bucket=bucket, where=where)};
        $$""")


def apply(conn) -> None:
    cursor = conn.cursor()
    cursor.execute("SELECT mode FROM telemetry_mode")
    row = cursor.fetchone()
    mode = row[0] if row else ("timescaledb" if _timescale_available(cursor) else "postgresql")
    (_apply_timescaledb if mode == "timescaledb" else _apply_postgresql)(cursor)
    cursor.execute("INSERT INTO telemetry_mode (mode) VALUES (%s) ON CONFLICT DO NOTHING", (mode,))


def rollback(conn) -> None:
    cursor = conn.cursor()
    cursor.execute("SELECT mode FROM telemetry_mode")
    row = cursor.fetchone()
    kind = "MATERIALIZED VIEW" if row and row[0] == "timescaledb" else "TABLE"
    cursor.execute(f"DROP {kind} IF EXISTS energy_hourly_job, energy_hourly_datacenter")
    for name, *_ in TABLES:
        cursor.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
    cursor.execute("DROP FUNCTION IF EXISTS telemetry_refresh_rollups(timestamptz, timestamptz)")
    cursor.execute("DROP FUNCTION IF EXISTS telemetry_ensure_partition(text, timestamptz)")
    cursor.execute("DELETE FROM telemetry_mode")


steps = [step(apply, rollback)]
