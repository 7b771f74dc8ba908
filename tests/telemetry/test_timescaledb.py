"""Telemetry in ``timescaledb`` mode (the TimescaleDB leg, ``scripts/test-timescaledb``): the
migrations build hypertables, continuous aggregates and the compression, retention and refresh
policies they intend, and those jobs, run through TimescaleDB's public ``CALL run_job(id)``, do
what the policies say: chunks past their age are compressed and still read back, agent statuses
past 90 days are dropped, the hourly rollups are materialized and equal the raw sums."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from metatune import contracts as c
from metatune import subjects
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.samples import started
from tests.support.storage import TIMESCALEDB_VERSION

pytestmark = pytest.mark.storage("timescaledb")

# The telemetry's policies (migrations 0002, 0003, 0005): (job's procedure, table or view) -> config
POLICIES = {
    ("policy_compression", "event_log"): {"compress_after": "30 days"},
    ("policy_compression", "run_metrics"): {"compress_after": "7 days"},
    ("policy_compression", "agent_status"): {"compress_after": "2 days"},
    ("policy_compression", "forecast_points"): {"compress_after": "14 days"},
    ("policy_retention", "agent_status"): {"drop_after": "90 days"},
    ("policy_refresh_continuous_aggregate", "energy_hourly_job"): {
        "start_offset": "30 days",
        "end_offset": "01:00:00",
    },
    ("policy_refresh_continuous_aggregate", "energy_hourly_datacenter"): {
        "start_offset": "30 days",
        "end_offset": "01:00:00",
    },
}


async def jobs(db) -> dict[tuple[str, str], tuple[int, dict[str, Any]]]:
    """This schema's TimescaleDB jobs: (procedure, table or continuous aggregate) -> (id, config
    without the internal hypertable ids)."""
    rows = await db.fetch(
        "SELECT j.job_id, j.proc_name, coalesce(a.view_name, j.hypertable_name), j.config "
        "FROM timescaledb_information.jobs j "
        "LEFT JOIN timescaledb_information.continuous_aggregates a "
        "  ON (a.materialization_hypertable_schema, a.materialization_hypertable_name) "
        "   = (j.hypertable_schema, j.hypertable_name) "
        "WHERE %s IN (j.hypertable_schema, a.view_schema)",
        (db.schema,),
    )
    return {
        (proc, target): (job, {k: v for k, v in config.items() if not k.endswith("hypertable_id")})
        for job, proc, target, config in rows
    }


async def run_job(db, proc: str, target: str) -> None:
    job, _ = (await jobs(db))[(proc, target)]
    await db.fetch(f"CALL run_job({int(job)})")


async def chunks(db, table: str) -> list[bool]:
    """Whether each chunk of ``table`` is compressed, oldest first."""
    rows = await db.fetch(
        "SELECT is_compressed FROM timescaledb_information.chunks "
        "WHERE hypertable_schema = %s AND hypertable_name = %s ORDER BY range_start",
        (db.schema, table),
    )
    return [r[0] for r in rows]


def incoming(events, first: int = 1) -> list[Incoming]:
    return [Incoming("METATUNE", first + i, s, e.to_bytes()) for i, (s, e) in enumerate(events)]


async def test_the_migrations_build_hypertables_aggregates_and_their_policies(db) -> None:
    assert db.mode == "timescaledb"
    assert await db.migrate() == []
    assert await db.fetch("SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'") == [
        (TIMESCALEDB_VERSION,)
    ]
    hypertables = await db.fetch(
        "SELECT hypertable_name, compression_enabled FROM timescaledb_information.hypertables "
        "WHERE hypertable_schema = %s",
        (db.schema,),
    )
    assert dict(hypertables) == {
        "event_log": True,
        "run_metrics": True,
        "agent_status": True,
        "forecast_points": True,
        "job_energy": False,
    }
    segment_by = await db.fetch(
        "SELECT hypertable_name, attname FROM timescaledb_information.compression_settings "
        "WHERE hypertable_schema = %s AND segmentby_column_index IS NOT NULL",
        (db.schema,),
    )
    assert set(segment_by) == {
        ("event_log", "subject"),
        ("run_metrics", "job_id"),
        ("agent_status", "datacenter"),
        ("forecast_points", "region"),
    }
    aggregates = await db.fetch(
        "SELECT view_name, materialized_only FROM timescaledb_information.continuous_aggregates "
        "WHERE view_schema = %s",
        (db.schema,),
    )
    assert dict(aggregates) == {"energy_hourly_job": False, "energy_hourly_datacenter": False}
    assert {key: config for key, (_, config) in (await jobs(db)).items()} == POLICIES


def status(at: datetime, gpus_free: int) -> tuple[str, c.AgentStatus]:
    return subjects.agent_status("fra1"), c.AgentStatus(
        occurred_at=at,
        datacenter="fra1",
        region="DE",
        gpus_total=8,
        gpus_free=gpus_free,
        gpu_model="H100",
        power_per_gpu_w=700.0,
        pue=1.2,
    )


async def test_compression_and_retention_jobs_compress_old_chunks_and_drop_old_statuses(db) -> None:
    now = datetime.now(UTC)
    ages = {100: 1, 20: 2, 0: 3}  # days old -> gpus_free, one week's chunk each
    await EventWriter(db).write(
        incoming([status(now - timedelta(days=days), free) for days, free in ages.items()])
    )
    statuses = "SELECT gpus_free FROM agent_status ORDER BY time"
    logged = "SELECT payload->>'gpus_free' FROM event_log ORDER BY occurred_at"
    assert await chunks(db, "agent_status") == [False, False, False]
    for table in ("agent_status", "event_log"):
        await run_job(db, "policy_compression", table)
    assert await chunks(db, "agent_status") == [True, True, False]  # older than 2 days
    assert await chunks(db, "event_log") == [True, False, False]  # older than 30 days
    assert [r[0] for r in await db.fetch(statuses)] == [1, 2, 3]  # compressed rows read back
    assert [r[0] for r in await db.fetch(logged)] == ["1", "2", "3"]

    await run_job(db, "policy_retention", "agent_status")
    assert await chunks(db, "agent_status") == [True, False]  # the chunk past 90 days is gone
    assert [r[0] for r in await db.fetch(statuses)] == [2, 3]
    assert [r[0] for r in await db.fetch(logged)] == ["1", "2", "3"]  # the audit log keeps all


def progress(job, step: int, hours: list[tuple[datetime, float]], at: datetime):
    accounting = c.RunAccounting(
        tokens_seen=100 * step,
        tokens_with_padding=120 * step,
        energy_wh=sum(wh for _, wh in hours),
        hours=[
            c.HourlyEnergy(
                hour=h,
                datacenter="fra1",
                pue=1.2,
                energy_wh=wh,
                g_per_kwh=300.0,
                emissions_g=wh / 1000 * 1.2 * 300.0,
            )
            for h, wh in hours
        ],
    )
    return subjects.run_progress("fra1", job), c.RunProgress(
        occurred_at=at,
        job_id=job,
        datacenter="fra1",
        step=step,
        total_steps=100,
        power_w=300.0,
        accounting=accounting,
    )


async def materialized(db, view: str) -> list[tuple[Any, ...]]:
    """The rows the continuous aggregate ``view`` has materialized (its materialization
    hypertable, as ``timescaledb_information.continuous_aggregates`` names it)."""
    [(schema, table)] = await db.fetch(
        "SELECT materialization_hypertable_schema, materialization_hypertable_name "
        "FROM timescaledb_information.continuous_aggregates WHERE view_schema = %s AND view_name = %s",
        (db.schema, view),
    )
    return await db.fetch(f'SELECT bucket, energy_wh FROM "{schema}"."{table}" ORDER BY bucket')


async def test_the_refresh_jobs_materialize_the_hourly_rollups_up_to_an_hour_ago(db) -> None:
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    early, later, current = hour - timedelta(hours=5), hour - timedelta(hours=4), hour
    job = uuid4()
    writer = EventWriter(db)
    await writer.write(incoming([started(job, at=early), progress(job, 1, [(early, 100.0)], now)]))
    raw = (
        "SELECT hour, sum(energy_wh) FROM job_energy GROUP BY 1 ORDER BY 1",
        "SELECT bucket, energy_wh FROM {view} ORDER BY 1",
    )
    for view in ("energy_hourly_job", "energy_hourly_datacenter"):
        assert await materialized(db, view) == []  # nothing yet: the view is real-time only
        assert await db.fetch(raw[1].format(view=view)) == await db.fetch(raw[0])

    # the run's later accounting: its first hour grew, two more began (one is the current hour)
    hours = [(early, 180.0), (later, 40.0), (current, 10.0)]
    await writer.write(incoming([progress(job, 2, hours, now)], first=3))
    for view in ("energy_hourly_job", "energy_hourly_datacenter"):
        await run_job(db, "policy_refresh_continuous_aggregate", view)
        # whole hours up to an hour ago are materialized; the current one stays real-time
        assert await materialized(db, view) == [(early, 180.0), (later, 40.0)]
        assert await db.fetch(raw[1].format(view=view)) == await db.fetch(raw[0])

    # a later report of an hour already materialized: the next run of the job brings it in (until
    # then the view shows the materialized sum; the policy runs every 15 minutes)
    hours = [(early, 200.0), (later, 40.0), (current, 10.0)]
    await writer.write(incoming([progress(job, 3, hours, now)], first=4))
    for view in ("energy_hourly_job", "energy_hourly_datacenter"):
        await run_job(db, "policy_refresh_continuous_aggregate", view)
        assert await materialized(db, view) == [(early, 200.0), (later, 40.0)]
        assert await db.fetch(raw[1].format(view=view)) == await db.fetch(raw[0])
