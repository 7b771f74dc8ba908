"""Read side of ``/api/studies/{id}/records`` and ``/api/regions/{region}/forecasts``: the rows
:mod:`..domain.records` shapes (read only)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from metatune.registry import Registry

from ...adapters.db import Database
from ...disclosure.adapters.queries import site_facts, study_classes
from ..domain.records import ForecastHistory, StudyRecords, forecast_history, study_records
from .baselines import run_now

REQUESTS = """
SELECT job_id, trial_index, requested_at, home_datacenter, metric_name, predicted_metric,
       predicted_metric_std, predicted_metric_low, predicted_metric_high
FROM job_requests WHERE study_id = %s
"""
RESULTS = """
SELECT job_id, status, finished_at, early_stopped, metrics, energy_wh, majority_baseline
FROM run_results WHERE study_id = %s
"""
HOURS = """
SELECT job_id, hour, datacenter, energy_wh, pue, g_per_kwh, emissions_g
FROM job_energy WHERE job_id = ANY(%s)
"""
FORECAST_POINTS = """
SELECT issued_at, model_version, stale, hour, g_per_kwh, p10_g_per_kwh, p90_g_per_kwh
FROM forecast_points WHERE region = %(region)s AND hour >= %(start)s AND hour < %(end)s
"""


async def study_records_of(db: Database, study_id: UUID, registry: Registry) -> StudyRecords:
    """Every trial of ``study_id`` telemetry has stored (none: an empty list), each with its
    run-now baseline at the sites of ``registry`` (as the agents last reported them)."""
    specs = await db.fetch("SELECT spec FROM studies WHERE study_id = %s", (study_id,))
    requests = await db.fetch_dicts(REQUESTS, (study_id,))
    results = await db.fetch_dicts(RESULTS, (study_id,))
    jobs = list({row["job_id"] for row in [*requests, *results]})
    hours = await db.fetch_dicts(HOURS, (jobs,)) if jobs else []
    sites = await site_facts(db, registry)
    spec = (specs[0][0] if specs else None) or {}
    baselines = {}
    for q in requests:
        home = q["home_datacenter"] or spec.get("home_datacenter")
        mine = [h for h in hours if h["job_id"] == q["job_id"]]
        baseline = await run_now(db, sites, home, q["requested_at"], mine)
        baselines[q["job_id"]] = None if baseline.kgco2eq is None else baseline.kgco2eq * 1000
    return study_records(
        study_id,
        specs[0][0] if specs else None,
        requests,
        results,
        hours,
        await study_classes(db, study_id),
        baselines,
    )


async def region_forecasts(
    db: Database, region: str, start: datetime, end: datetime
) -> ForecastHistory:
    """Every issue's points of ``region`` for the hours in ``[start, end)``."""
    rows = await db.fetch_dicts(FORECAST_POINTS, {"region": region, "start": start, "end": end})
    return forecast_history(region, start, end, rows)
