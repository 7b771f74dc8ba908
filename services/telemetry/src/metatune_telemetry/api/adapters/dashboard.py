"""Read side of the dashboard views: a job's timeline, a datacenter's forecasts, a study's trials."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from metatune.deadlines import deadline_outcome
from metatune.display import chance_baseline, trial_outcome
from metatune.emissions import as_run, grams, total
from metatune.registry import Registry

from ...adapters.db import Database
from ...disclosure.adapters.queries import priced_hours, site_facts
from ..domain.views import (
    DatacenterForecast,
    ForecastCurve,
    JobTimeline,
    Mark,
    StudyListing,
    Trial,
    stretches,
    trial,
)
from .baselines import run_now

LATEST_PLAN = """
SELECT p.plan_version, e.datacenter, e.hours, e.emissions_g
FROM plan_entries e JOIN plans p USING (event_id)
WHERE e.job_id = %(job)s AND e.event_id = (
    SELECT pe.event_id FROM plan_entries pe JOIN plans pp USING (event_id) WHERE pe.job_id = %(job)s
    ORDER BY pp.plan_version DESC, pp.occurred_at DESC LIMIT 1)
"""
LATEST_FORECASTS = """
SELECT issued_at, min(model_version), bool_or(stale), array_agg(hour ORDER BY hour),
       array_agg(g_per_kwh ORDER BY hour), array_agg(p10_g_per_kwh ORDER BY hour), array_agg(p90_g_per_kwh ORDER BY hour)
FROM forecast_points
WHERE region = %(region)s AND issued_at IN (
    SELECT DISTINCT issued_at FROM forecast_points WHERE region = %(region)s ORDER BY issued_at DESC LIMIT %(n)s)
GROUP BY issued_at ORDER BY issued_at DESC
"""
TRIALS = """
SELECT q.job_id, q.trial_index, r.status, q.metric_name, q.predicted_metric, q.predicted_metric_std, q.predicted_loss,
       q.predicted_loss_std, r.metrics, r.early_stopped, r.stop_reason, r.steps, r.majority_baseline,
       p.n_classes
FROM job_requests q LEFT JOIN run_results r USING (job_id) LEFT JOIN study_profiles p ON p.study_id = q.study_id
WHERE q.study_id = %s ORDER BY q.trial_index
"""


async def job_timeline(db: Database, job_id: UUID, registry: Registry) -> JobTimeline | None:
    """None when telemetry has nothing of ``job_id``."""
    requests = await db.fetch_dicts("SELECT * FROM job_requests WHERE job_id = %s", (job_id,))
    results = await db.fetch_dicts(
        "SELECT study_id, status, early_stopped, stop_reason, steps FROM run_results "
        "WHERE job_id = %s",
        (job_id,),
    )
    sites = await site_facts(db, registry)
    hours = await priced_hours(db, [job_id], sites)
    plan = await db.fetch(LATEST_PLAN, {"job": job_id})
    marks = await db.fetch_dicts(
        "SELECT occurred_at AS at, datacenter, action FROM assignments WHERE job_id = %s "
        "ORDER BY occurred_at",
        (job_id,),
    )
    if not (requests or results or hours or plan or marks):
        return None
    q = requests[0] if requests else {}
    r = results[0] if results else {}
    home, requested_at = q.get("home_datacenter"), q.get("requested_at")
    return JobTimeline(
        job_id=job_id,
        study_id=q.get("study_id") or r.get("study_id"),
        trial_index=q.get("trial_index"),
        status=trial_outcome(
            r.get("status") or ("running" if hours else "requested"),
            early_stopped=r.get("early_stopped"),
            stop_reason=r.get("stop_reason"),
            steps=r.get("steps"),
        ),
        home_datacenter=home,
        ran=stretches(
            (h["hour"], h["datacenter"], h["energy_wh"] * h["pue"], _grams(h, realised=True))
            for h in hours
        ),
        forecast_kgco2eq=_total_kg(_grams(h, realised=False) for h in hours) if hours else None,
        realised_hours=sum(1 for h in hours if h["realised_g_per_kwh"] is not None),
        forecast_priced_hours=sum(
            1 for h in hours if h["realised_g_per_kwh"] is None and h["g_per_kwh"] is not None
        ),
        plan_version=plan[0][0] if plan else None,
        planned=stretches(
            (h, dc, None, None) for _, dc, entry_hours, _ in plan for h in entry_hours
        ),
        planned_kgco2eq=sum(row[3] for row in plan) / 1000 if plan else None,
        assignments=[Mark(**m) for m in marks],
        baseline=await run_now(db, sites, home, requested_at, hours),
    )


async def study_timelines(
    db: Database, job_ids: Iterable[UUID], registry: Registry
) -> list[JobTimeline]:
    """The timeline of each of ``job_ids`` (a study's trials) telemetry has something of."""
    found = [await job_timeline(db, job, registry) for job in job_ids]
    return [t for t in found if t is not None]


def _grams(hour: dict[str, Any], *, realised: bool) -> float | None:
    """A job-hour's gCO2eq as run (``realised``: :func:`metatune.emissions.as_run`), else as the
    agent charged it at the forecast's price; None where unpriced."""
    forecast = hour["g_per_kwh"]
    if realised:
        return as_run(hour["energy_wh"], hour["pue"], forecast, hour["realised_g_per_kwh"])[0]
    return grams(hour["energy_wh"], hour["pue"], forecast)


def _total_kg(values: Iterable[float | None]) -> float | None:
    summed = total(values)
    return None if summed is None else summed / 1000


async def datacenter_forecast(
    db: Database, datacenter: str, registry: Registry, issues: int = 3
) -> DatacenterForecast:
    """The ``issues`` latest forecasts of the grid region ``datacenter`` draws from."""
    region = (await site_facts(db, registry)).region_of.get(datacenter)
    rows = await db.fetch(LATEST_FORECASTS, {"region": region, "n": issues}) if region else []
    curves = [
        ForecastCurve(
            issued_at=issued,
            model_version=version,
            stale=stale,
            hours=hours,
            g_per_kwh=median,
            p10_g_per_kwh=low,
            p90_g_per_kwh=high,
        )
        for issued, version, stale, hours, median, low, high in rows
    ]
    return DatacenterForecast(datacenter=datacenter, region=region, curves=curves)


STUDIES = """
SELECT s.study_id, s.spec->>'name' AS name, s.submitted_at, s.base_model, s.task,
       count(q.job_id) AS trials_requested, count(r.job_id) AS trials_finished,
       max((r.metrics->>'accuracy')::double precision) AS best_accuracy,
       max(r.majority_baseline) AS majority_baseline, min(p.n_classes) AS n_classes,
       (s.spec->>'deadline')::timestamptz AS deadline,
       array_remove(array_agg(r.finished_at), NULL) AS ended
FROM studies s LEFT JOIN job_requests q USING (study_id) LEFT JOIN run_results r USING (job_id)
LEFT JOIN study_profiles p ON p.study_id = s.study_id
GROUP BY s.study_id ORDER BY s.submitted_at DESC LIMIT %s
"""


async def study_index(db: Database, limit: int = 500) -> list[StudyListing]:
    """The latest ``limit`` studies, newest first."""
    listings = []
    for row in await db.fetch_dicts(STUDIES, (limit,)):
        classes, ended = row.pop("n_classes"), row.pop("ended")
        late = (
            None
            if row["deadline"] is None or not ended
            else deadline_outcome(row["deadline"], ended)
        )
        listings.append(
            StudyListing(
                **row,
                chance_baseline=chance_baseline(classes),
                deadline_met=None if late is None else late.met,
                trials_late=0 if late is None else late.late,
                late_by_s=None if late is None else late.late_by_s,
                deadline_cell="-" if late is None else late.cell(),
            )
        )
    return listings


async def study_trials(db: Database, study_id: UUID) -> list[Trial]:
    return [trial(*row) for row in await db.fetch(TRIALS, (study_id,))]
