"""``/metrics`` of the real app over a real PostgreSQL: the exposition parses with
prometheus_client's own parser, and each metric holds what the rows this test stored say."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from uuid import uuid4

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from metatune.settings import Settings
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.api.adapters.metrics import JOB_STATES
from tests.support.samples import CONFIG, NOW

from .recording import outbox
from .scenario import record_dashboard

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
STATUS_WINDOW_S = 1800.0  # 3 status intervals of 600 s


def scrape(client: TestClient) -> Samples:
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == CONTENT_TYPE_LATEST
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


async def stored(db, subject: str, payload: dict, ago_s: float, lag_s: float) -> None:
    """An event telemetry stored ``ago_s`` seconds ago, ``lag_s`` after it occurred."""
    await db.fetch(
        "INSERT INTO event_log (occurred_at, event_id, subject, stream, stream_seq, payload, stored_at) "
        "SELECT now() - make_interval(secs => %(ago)s + %(lag)s), %(id)s, %(subject)s, 'METATUNE_STATUS', "
        "1, %(payload)s::json, now() - make_interval(secs => %(ago)s)",
        {
            "ago": ago_s,
            "lag": lag_s,
            "id": uuid4(),
            "subject": subject,
            "payload": json.dumps(payload),
        },
    )


async def status(db, dc: str, total: int, free: int, ago_s: float, lag_s: float = 0.0) -> None:
    await stored(
        db,
        f"metatune.agents.{dc}.status",
        {"datacenter": dc, "gpus_total": total, "gpus_free": free},
        ago_s,
        lag_s,
    )


async def job(db, study, *actions: str, cancelled: bool = False) -> None:
    """A requested job, then each assignment action in order (a minute apart)."""
    job_id = uuid4()
    await db.fetch(
        "INSERT INTO job_requests (job_id, study_id, trial_index, requested_at, base_model, config, "
        "gpus, estimated_gpu_hours, power_kw, deadline) VALUES (%s, %s, 9, %s, 'm', %s, 1, 1, 0.3, %s)",
        (job_id, study, NOW, CONFIG.model_dump_json(), NOW + timedelta(days=1)),
    )
    for i, action in enumerate(actions):
        await db.fetch(
            "INSERT INTO assignments (event_id, occurred_at, job_id, study_id, datacenter, action, "
            "plan_version, gpus, hours_planned) VALUES (%s, %s, %s, %s, 'fra1', %s, 1, 1, 1)",
            (uuid4(), NOW + timedelta(minutes=i), job_id, study, action),
        )
    if cancelled:
        await db.fetch(
            "INSERT INTO job_cancellations (job_id, study_id, cancelled_at) VALUES (%s, %s, %s)",
            (job_id, study, NOW),
        )


async def test_metrics_hold_what_the_tables_say(db) -> None:
    s = await record_dashboard(db)  # plan v3, two trials completed (one early-stopped), fra1 8 GPUs
    began = time.monotonic()
    # everything recorded so far was stored an hour ago: out of the lag and liveness windows
    await db.fetch("UPDATE event_log SET stored_at = now() - interval '1 hour'")
    await status(db, "fra1", 8, 5, ago_s=10, lag_s=2)
    await status(db, "osl1", 4, 1, ago_s=20, lag_s=42)
    await status(db, "sjc1", 8, 0, ago_s=STATUS_WINDOW_S + 60)  # its agent stopped reporting
    # forecasts are issued ahead of the hours they cover: never counted as lag
    await stored(db, "metatune.forecasts.DE", {"region": "DE"}, ago_s=1, lag_s=9999)
    await outbox(db, "pending", 0, age_s=100)
    await outbox(db, "pending", 2, age_s=300)  # failed twice, waiting for its retry
    await outbox(db, "sending", 1, age_s=50)
    await outbox(db, "dead", 8, age_s=5000)
    await outbox(db, "delivered", 1, age_s=9000)
    await db.fetch(  # an earlier version stored later: the latest plan is the highest version
        "INSERT INTO plans (event_id, occurred_at, plan_version, horizon_start, expected_emissions_g, "
        "baseline_emissions_g, solve_seconds, infeasible_jobs) VALUES (%s, %s, 2, %s, 1, 2, 9.5, %s)",
        (uuid4(), NOW + timedelta(hours=5), NOW, [uuid4()]),
    )
    await job(db, s.study)  # requested
    await job(db, s.study, "start")
    await job(db, s.study, "start", "pause")
    await job(db, s.study, "start", "pause", "resume", "stop")
    await job(db, s.study, cancelled=True)

    with TestClient(create_app(db, Settings(agent_status_interval_s=600))) as client:
        got = scrape(client)
    elapsed = time.monotonic() - began

    def value(name: str, **labels: str) -> float:
        return got[(name, tuple(sorted(labels.items())))]

    assert value("metatune_telemetry_ingestion_lag_seconds") == pytest.approx(42.0)
    assert value("metatune_telemetry_events_stored_recent") == 2  # fra1, osl1 (sjc1: older)
    assert value("metatune_webhook_outbox_depth", state="pending") == 2
    assert value("metatune_webhook_outbox_depth", state="sending") == 1
    assert 300 <= value("metatune_webhook_outbox_oldest_age_seconds") <= 300 + elapsed + 1
    assert value("metatune_webhook_failures", kind="retrying") == 2
    assert value("metatune_webhook_failures", kind="dead") == 1
    assert value("metatune_plan_version") == 3
    assert value("metatune_plan_solve_seconds") == pytest.approx(0.1)
    assert value("metatune_plan_jobs") == 1
    assert value("metatune_plan_infeasible_jobs") == 0
    assert value("metatune_plan_expected_emissions_grams") == pytest.approx(35.0)
    assert value("metatune_plan_baseline_emissions_grams") == pytest.approx(600.0)
    assert value("metatune_plan_timestamp_seconds") == NOW.timestamp()
    assert value("metatune_agents_alive") == 2
    up = {
        dict(labels)["datacenter"]: v for (n, labels), v in got.items() if n == "metatune_agent_up"
    }
    assert up["fra1"] == up["osl1"] == 1 and up["sjc1"] == 0 and up["mad1"] == 0
    assert value("metatune_gpus_busy", datacenter="fra1") == 3  # its latest status
    assert value("metatune_gpus_busy", datacenter="osl1") == 3
    assert value("metatune_gpus_total", datacenter="osl1") == 4
    assert ("metatune_gpus_busy", (("datacenter", "sjc1"),)) not in got
    jobs = {state: value("metatune_jobs", state=state) for state in JOB_STATES}
    assert jobs == {
        "requested": 1,
        "running": 1,
        "paused": 1,
        "stopped": 1,
        "cancelled": 1,
        "completed": 1,
        "early_stopped": 1,
        "failed": 0,
    }


async def test_an_empty_database_exposes_zeros_and_no_plan(db) -> None:
    # two apps in one process: each has its own registry (the global one would refuse the second)
    apps = [create_app(db, Settings()) for _ in range(2)]
    for app in apps:
        with TestClient(app) as client:
            got = scrape(client)
        names = {name for name, _ in got}
        assert not any(n.startswith("metatune_plan_") for n in names)
        assert "metatune_telemetry_ingestion_lag_seconds" not in names  # nothing stored lately
        assert got[("metatune_agents_alive", ())] == 0
        assert got[("metatune_webhook_outbox_oldest_age_seconds", ())] == 0
        assert {v for (n, _), v in got.items() if n == "metatune_jobs"} == {0}
