"""Read side: what the report, the API and the dashboard ask the database."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from metatune.contracts import Hardware
from metatune.display import chance_baseline
from metatune.registry import Registry

from ...adapters.db import Database
from ..domain.disclosure import HourInput, RunInput, StudyDisclosure, disclose_study
from ..domain.priced_from import ForecastHour, pricing_forecast


@dataclass(frozen=True, slots=True)
class Sites:
    """Per datacenter: grid region, PUE, (GPU model, rated W), the latest agent status over the registry."""

    region_of: dict[str, str]
    pue_of: dict[str, float]
    gpu_of: dict[str, tuple[str | None, float | None]]


async def site_facts(db: Database, registry: Registry) -> Sites:
    sites = Sites(
        {dc.name: dc.region for dc in registry.datacenters},
        {dc.name: dc.pue for dc in registry.datacenters},
        {dc.name: (dc.gpu_model, dc.gpu_power_w) for dc in registry.datacenters},
    )
    for a in await db.fetch_dicts(
        "SELECT DISTINCT ON (datacenter) datacenter, region, gpu_model, power_per_gpu_w, pue "
        "FROM agent_status ORDER BY datacenter, time DESC"
    ):
        sites.region_of[a["datacenter"]] = a["region"]
        sites.pue_of[a["datacenter"]] = a["pue"]
        sites.gpu_of[a["datacenter"]] = (a["gpu_model"], a["power_per_gpu_w"])
    return sites


HOUR_COLUMNS = (
    "hour",
    "datacenter",
    "energy_wh",
    "pue",
    "g_per_kwh",
    "realised_g_per_kwh",
    "realised_emission_factors",
)
# each job-hour beside the observed (average, location-based) intensity of its datacenter's grid
# region in that hour: NULL until the hour is observed, when the forecast price stands
REALISED_JOIN = (
    "FROM job_energy e "
    "LEFT JOIN unnest(%(dcs)s::text[], %(regions)s::text[]) AS m(datacenter, region) "
    "ON m.datacenter = e.datacenter "
    "LEFT JOIN observed_intensity o ON o.region = m.region AND o.hour = e.hour "
    "AND o.signal = 'average'"
)
PRICED_HOURS = (
    "SELECT e.job_id, e.hour, e.datacenter, e.energy_wh, e.pue, e.g_per_kwh, "
    "o.g_per_kwh AS realised_g_per_kwh, o.emission_factors AS realised_emission_factors "
    + REALISED_JOIN
    + " WHERE {where} ORDER BY e.hour, e.datacenter"
)
# every job-hour: at its realised intensity where observed, else the forecast's (unpriced: none)
PRICED_TOTALS = (
    "SELECT sum(e.energy_wh * e.pue * coalesce(o.g_per_kwh, e.g_per_kwh)) / 1e6 AS kgco2eq, "
    "count(o.g_per_kwh) AS realised_hours, "
    "count(e.g_per_kwh) FILTER (WHERE o.g_per_kwh IS NULL) AS forecast_priced_hours "
    + REALISED_JOIN
)


async def priced_hours(
    db: Database, job_ids: list[Any] | None, sites: Sites
) -> list[dict[str, Any]]:
    """Job-hours (of ``job_ids``; every job's with None) with their forecast price (what the agent
    charged) and the realised intensity where the hour is observed."""
    params: dict[str, Any] = {
        "dcs": list(sites.region_of),
        "regions": list(sites.region_of.values()),
        "ids": job_ids,
    }
    where = "TRUE" if job_ids is None else "e.job_id = ANY(%(ids)s)"
    return await db.fetch_dicts(PRICED_HOURS.format(where=where), params)


# the stored forecast hours of the given (region, hour) pairs (disclosure/domain/priced_from.py)
FORECAST_HOURS = (
    "SELECT p.region, p.hour, p.issued_at, p.p10_g_per_kwh, p.g_per_kwh, p.p90_g_per_kwh, "
    "p.stale, p.short_history FROM forecast_points p "
    "JOIN unnest(%(regions)s::text[], %(hours)s::timestamptz[]) AS k(region, hour) "
    "ON p.region = k.region AND p.hour = k.hour"
)


async def forecast_hours(
    db: Database, keys: set[tuple[str, Any]]
) -> dict[tuple[str, Any], list[ForecastHour]]:
    """Per (region, hour): every stored forecast hour (one per issue) with its flags."""
    if not keys:
        return {}
    regions, hours = zip(*sorted(keys), strict=True)
    out: dict[tuple[str, Any], list[ForecastHour]] = defaultdict(list)
    for row in await db.fetch_dicts(
        FORECAST_HOURS, {"regions": list(regions), "hours": list(hours)}
    ):
        out[(row["region"], row["hour"])].append(
            ForecastHour(
                row["issued_at"],
                row["p10_g_per_kwh"],
                row["g_per_kwh"],
                row["p90_g_per_kwh"],
                row["stale"],
                row["short_history"],
            )
        )
    return out


async def priced_totals(db: Database, sites: Sites) -> dict[str, Any]:
    """Emissions of every job-hour so far, realised where observed (``kgco2eq``), and how many
    hours are priced each way."""
    rows = await db.fetch_dicts(
        PRICED_TOTALS, {"dcs": list(sites.region_of), "regions": list(sites.region_of.values())}
    )
    return rows[0]


async def run_inputs(db: Database, study_id: UUID, registry: Registry) -> list[RunInput]:
    """Every trial of ``study_id`` (requested or with a result), with its hourly energy."""
    jobs = await db.fetch_dicts(
        "SELECT COALESCE(q.job_id, r.job_id) AS job_id, q.trial_index, q.base_model, q.gpus, r.status, "
        "r.wall_seconds, r.tokens_seen, r.tokens_with_padding, r.datacenter, r.hardware, "
        "r.early_stopped, r.stop_reason, r.steps, "
        "(r.metrics->>'accuracy')::double precision AS accuracy, r.majority_baseline, "
        "r.finished_at "
        "FROM (SELECT * FROM job_requests WHERE study_id = %s) q "
        "FULL JOIN (SELECT * FROM run_results WHERE study_id = %s) r ON r.job_id = q.job_id "
        "ORDER BY q.trial_index NULLS LAST",
        (study_id, study_id),
    )
    ids = [j["job_id"] for j in jobs]
    chance = chance_baseline(await study_classes(db, study_id))
    sites = await site_facts(db, registry)
    hours = await priced_hours(db, ids, sites)
    metrics = await db.fetch_dicts(
        "SELECT job_id, min(time) AS start, avg(power_w) FILTER (WHERE power_w > 0) AS mean_power_w, "
        "max(tokens_seen) AS tokens_seen, max(tokens_with_padding) AS tokens_with_padding "
        "FROM run_metrics WHERE job_id = ANY(%s) GROUP BY job_id",
        (ids,),
    )
    by_job = await _hours_by_job(db, hours, sites)
    metric_of = {m["job_id"]: m for m in metrics}
    region_of, pue_of, gpu_of = sites.region_of, sites.pue_of, sites.gpu_of
    out = []
    for j in jobs:
        m = metric_of.get(j["job_id"], {})
        job_hours = by_job.get(j["job_id"], [])
        where = j["datacenter"] or (job_hours[0].datacenter if job_hours else None)
        gpu_model, gpu_power = gpu_of.get(where, (None, None)) if where else (None, None)
        out.append(
            RunInput(
                job_id=j["job_id"],
                study_id=study_id,
                trial_index=j["trial_index"],
                status=j["status"] or "running",
                base_model=j["base_model"],
                gpus=j["gpus"],
                gpu_model=gpu_model,
                gpu_power_w=gpu_power,
                region_of=region_of,
                pue_of=pue_of,
                start=m.get("start"),
                wall_seconds=j["wall_seconds"],
                mean_power_w=m.get("mean_power_w"),
                tokens_seen=j["tokens_seen"]
                if j["tokens_seen"] is not None
                else m.get("tokens_seen"),
                tokens_with_padding=j["tokens_with_padding"]
                if j["tokens_with_padding"] is not None
                else m.get("tokens_with_padding"),
                hours=job_hours,
                hardware=Hardware.model_validate(j["hardware"]) if j["hardware"] else None,
                early_stopped=bool(j["early_stopped"]),
                stop_reason=j["stop_reason"],
                steps=j["steps"],
                accuracy=j["accuracy"],
                majority_baseline=j["majority_baseline"],
                chance_baseline=chance,
                ended_at=j["finished_at"],
            )
        )
    return out


async def _hours_by_job(
    db: Database, hours: list[dict[str, Any]], sites: Sites
) -> dict[Any, list[HourInput]]:
    """Each job's priced hours, each with the flags (stale, short history) of the stored forecast
    whose price the agent charged."""
    stored = await forecast_hours(
        db,
        {
            (sites.region_of[h["datacenter"]], h["hour"])
            for h in hours
            if h["datacenter"] in sites.region_of and h["g_per_kwh"] is not None
        },
    )
    by_job: dict[Any, list[HourInput]] = defaultdict(list)
    for h in hours:
        region = sites.region_of.get(h["datacenter"])
        candidates = [] if region is None else stored.get((region, h["hour"]), [])
        source = pricing_forecast(h["g_per_kwh"], candidates)
        by_job[h["job_id"]].append(
            HourInput(
                **{k: h[k] for k in HOUR_COLUMNS},
                forecast_flags=source.flags if source is not None else [],
            )
        )
    return by_job


async def study_disclosure(db: Database, study_id: UUID, registry: Registry) -> StudyDisclosure:
    deadline = await db.fetch(
        "SELECT (spec->>'deadline')::timestamptz FROM studies WHERE study_id = %s", (study_id,)
    )
    return disclose_study(
        study_id, await run_inputs(db, study_id, registry), deadline[0][0] if deadline else None
    )


async def study_classes(db: Database, study_id: UUID) -> int | None:
    """How many classes the study's profile counted (0: a causal LM; None: not profiled)."""
    rows = await db.fetch("SELECT n_classes FROM study_profiles WHERE study_id = %s", (study_id,))
    return rows[0][0] if rows else None


async def study_name(db: Database, study_id: UUID) -> str | None:
    """The name the study was submitted with (``StudySpec.name``), if it has one."""
    rows = await db.fetch("SELECT spec->>'name' FROM studies WHERE study_id = %s", (study_id,))
    return rows[0][0] if rows else None


async def find_study(db: Database, prefix: str) -> UUID | None:
    """A study id from its full form or a unique prefix (as ``metatune events`` prints them)."""
    rows = await db.fetch(
        "SELECT DISTINCT study_id FROM (SELECT study_id FROM studies UNION "
        "SELECT study_id FROM job_requests) s WHERE study_id::text LIKE %s LIMIT 2",
        (prefix.lower() + "%",),
    )
    return rows[0][0] if len(rows) == 1 else None
