"""Migrations from empty and re-run; rollups equal the sums of the raw job-hour rows; the
disclosure of a recorded run equals a hand computation; unknown intensity is unpriced."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from importlib import resources
from uuid import uuid4

import pytest
from yoyo import get_backend, read_migrations

from metatune import subjects
from metatune.postgres import yoyo_uri
from metatune.registry import default_registry
from metatune_telemetry.disclosure.adapters.queries import study_disclosure
from metatune_telemetry.disclosure.domain.formats import to_csv, to_markdown
from metatune_telemetry.ingest.adapters.writer import EventWriter
from tests.support.builders import requested
from tests.support.samples import NOW, SPEC, started

from .conftest import count
from .recording import hour, incoming, progress, record_two_trials


@pytest.mark.storage("postgresql")  # its TimescaleDB counterpart: test_timescaledb.py
async def test_migrations_from_empty_then_rerun_apply_nothing(db) -> None:
    assert db.mode == "postgresql"  # no timescaledb in this server: the declared fallback
    assert await db.migrate() == []
    tables = {
        r[0]
        for r in await db.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (db.schema,)
        )
    }
    assert {
        "event_log",
        "event_rejects",
        "run_metrics",
        "job_energy",
        "energy_hourly_job",
        "energy_hourly_datacenter",
        "webhook_outbox",
        "forecast_points",
        "agent_status",
        "plans",
        "assignments",
    } <= tables
    partitioned = {
        r[0]
        for r in await db.fetch(
            "SELECT c.relname FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            (db.schema,),
        )
    }
    assert partitioned == {
        "event_log",
        "run_metrics",
        "forecast_points",
        "agent_status",
        "job_energy",
    }


async def test_ingest_migrations_roll_back_and_reapply_with_the_predictions_backfilled(db) -> None:
    """telemetry_0003 (json payload, indexes that skip metric events) and 0004 (prediction columns,
    filled from the logged events) both roll back and apply again."""
    study, job = uuid4(), uuid4()
    request = requested(
        job, study, predicted_metric=0.9, predicted_metric_std=0.02, metric_name="accuracy"
    )
    await EventWriter(db).write(incoming([(subjects.JOBS_REQUESTED, request)]))
    payload_type = (
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'event_log'::regclass "
        "AND attname = 'payload'"
    )
    indexes = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'event_log'"
    assert (await db.fetch(payload_type))[0][0] == "json"
    assert {
        "event_log_subject_nonmetric",
        "event_log_correlation_nonmetric",
        "event_log_stored_brin",
    } <= {r[0] for r in await db.fetch(indexes)}

    def rollback() -> None:
        backend = get_backend(yoyo_uri(db.url, db.schema))
        try:
            with resources.as_file(
                resources.files("metatune_telemetry").joinpath("migrations")
            ) as folder:
                migrations = read_migrations(str(folder))
                with backend.lock():
                    backend.rollback_migrations(
                        backend.to_rollback(
                            migrations.filter(
                                lambda m: (
                                    m.id in ("telemetry_0003_ingest", "telemetry_0004_predictions")
                                )
                            )
                        )
                    )
        finally:
            backend.connection.close()

    await asyncio.to_thread(rollback)
    assert (await db.fetch(payload_type))[0][0] == "jsonb"
    assert {"event_log_subject", "event_log_correlation"} <= {r[0] for r in await db.fetch(indexes)}
    assert await db.migrate() == ["telemetry_0003_ingest", "telemetry_0004_predictions"]
    assert (await db.fetch(payload_type))[0][0] == "json"
    assert await db.fetch(
        "SELECT metric_name, predicted_metric, predicted_metric_std FROM job_requests"
    ) == [("accuracy", 0.9, 0.02)]


async def test_rollups_equal_raw_sums_after_updates(db) -> None:
    writer = EventWriter(db)
    a, b = uuid4(), uuid4()
    events = [
        started(a),
        started(b, "osl1"),
        (subjects.run_progress("fra1", a), progress(a, 1, [hour(0, 100.0, 300.0)])),
        (subjects.run_progress("osl1", b), progress(b, 1, [hour(0, 50.0, None, "osl1")], "osl1")),
        # later accounting of a: hour 0 grew, hour 1 (another datacenter) began
        (
            subjects.run_progress("fra1", a),
            progress(
                a,
                2,
                [hour(0, 180.0, 300.0), hour(1, 40.0, 20.0, "osl1")],
                at=NOW + timedelta(hours=1),
            ),
        ),
        (
            subjects.run_progress("osl1", b),
            progress(
                b,
                2,
                [hour(0, 90.0, None, "osl1"), hour(1, 70.0, 25.0, "osl1")],
                "osl1",
                at=NOW + timedelta(hours=1),
            ),
        ),
    ]
    await writer.write(incoming(events[:4]))
    await writer.write(incoming(events[4:], first=5))
    raw = await db.fetch(
        "SELECT job_id, hour, sum(energy_wh), sum(emissions_g) FROM job_energy GROUP BY 1, 2 ORDER BY 1, 2"
    )
    rolled = await db.fetch(
        "SELECT job_id, bucket, energy_wh, emissions_g FROM energy_hourly_job ORDER BY 1, 2"
    )
    assert rolled == raw
    assert len(raw) == 4 and sum(r[2] for r in raw) == pytest.approx(180 + 40 + 90 + 70)
    per_dc = await db.fetch(
        "SELECT datacenter, bucket, energy_wh FROM energy_hourly_datacenter ORDER BY 1, 2"
    )
    raw_dc = await db.fetch(
        "SELECT datacenter, hour, sum(energy_wh) FROM job_energy GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert per_dc == raw_dc
    # an unpriced hour stays NULL (unknown), never 0
    assert (
        await db.fetch(
            "SELECT emissions_g FROM job_energy WHERE job_id = %s AND hour = %s", (b, NOW)
        )
    )[0][0] is None


@pytest.mark.parametrize("batches", [[0, 1], [1, 0], [(0, 1)], [(1, 0)]])
async def test_a_priced_job_hour_keeps_its_price_when_another_report_has_none(db, batches) -> None:
    """A job resumed from a checkpoint written before its hour was priced reports that hour
    unpriced; the price recorded stays, in whichever order or batch the reports arrive."""
    writer = EventWriter(db)
    job = uuid4()
    reports = [
        (subjects.run_progress("fra1", job), progress(job, 1, [hour(0, 100.0, 300.0)])),
        (
            subjects.run_progress("fra1", job),
            progress(
                job, 2, [hour(0, 100.0, None), hour(1, 40.0, 20.0)], at=NOW + timedelta(hours=1)
            ),
        ),
    ]
    await writer.write(incoming([started(job)]))
    sequence = 2
    for batch in batches:
        picked = [reports[i] for i in (batch if isinstance(batch, tuple) else (batch,))]
        await writer.write(incoming(picked, first=sequence))
        sequence += len(picked)
    assert await db.fetch(
        "SELECT datacenter, energy_wh, g_per_kwh, emissions_g FROM job_energy ORDER BY hour"
    ) == [("fra1", 100.0, 300.0, pytest.approx(36.0)), ("fra1", 40.0, 20.0, pytest.approx(0.96))]


async def test_disclosure_of_a_recorded_run_equals_hand_computation(db) -> None:
    study = await record_two_trials(db)
    report = await study_disclosure(db, study, default_registry())
    first, second = report.runs
    # by hand: 0.5 kWh x 1.2 x 300 g + 0.25 kWh x 1.2 x 100 g = 180 + 30 g = 0.21 kg
    assert first.kgco2eq == pytest.approx(0.21)
    assert first.facility_energy_kwh == pytest.approx(0.9)
    assert (first.base_model, first.gpu_model, first.gpu_count, first.grid_regions) == (
        SPEC.base_model,
        "H100",
        2,
        ["DE"],
    )
    assert first.total_time_h == pytest.approx(1.5) and first.tokens_with_padding == 10_000
    assert first.avg_gpu_utilisation == pytest.approx(300.0 / (2 * 700.0))
    assert [h.g_per_kwh for h in first.hours] == [300.0, 100.0]
    assert (
        second.pricing == "unpriced"
        and second.kgco2eq is None
        and second.unpriced_energy_kwh == pytest.approx(0.12)
    )
    assert first.device == "not reported" and not first.hardware_measured  # no hardware sent
    assert (second.device, second.cpu_model, second.gpu_model, second.gpu_count) == (
        "cpu",
        "AMD EPYC 7B13",
        None,
        0,
    )
    assert second.hardware_measured and second.avg_gpu_utilisation is None
    shown = to_markdown(report)
    assert "| Hardware | CPU AMD EPYC 7B13 |" in shown
    assert "| Hardware | 2 x GPU H100 (assumed: not reported by the run) |" in shown
    assert "## Trial #1 " in shown and "## Trial #2 " in shown  # numbered as the demo numbers
    assert report.kgco2eq is None and report.pricing == "partially_priced"
    assert report.priced_kgco2eq == pytest.approx(0.21)
    assert "unpriced" in to_markdown(report) and "priced part 210 g CO2eq" in to_markdown(report)
    assert to_csv(report).count("\n") == 3
    assert await count(db, "SELECT count(*) FROM run_results") == 2
