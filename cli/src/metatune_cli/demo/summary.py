"""The demo's closing table, computed from the database (telemetry's tables and the knowledge
base), not from what the demo saw on the bus.

Per study:

* **trials** run (completed, early-stopped, failed) against **the grid** of the same search space
  a user would otherwise sweep (:func:`metatune.knowledge.space.grid`, :data:`GRID_SIZE`
  configurations); its energy is the grid's size x the study's mean energy per full-length trial.
* **best** accuracy of the study's runs; **energy** (IT Wh) and **kgCO2eq** as metered hour by hour
  (``job_energy``).
* **run now at home** and **greedy**: the same measured energy, hour by hour, priced as if each
  trial had run without a break from the hour it was requested at the study's home datacenter
  (run now at home: the user's own cluster, no queue), or, taking the trials in the order they
  were requested, at the datacenter with the least emissions among those its residency allows
  that have a GPU free from the earliest hour one does (greedy: the platform's GPUs, no look-ahead),
  each at that site's PUE and the median intensity of the forecast in force at the request.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from metatune.knowledge.space import grid
from metatune.registry import Registry

GRID_SIZE = len(grid())


@dataclass
class StudyRow:
    study_id: str
    name: str
    trials: int
    completed: int
    early_stopped: int
    failed: int
    grid: int
    best_accuracy: float | None
    # the prediction published for the best trial before it trained (metatune.jobs.requested)
    best_predicted: float | None
    best_predicted_std: float | None
    majority_baseline: float | None  # accuracy of always predicting the most common label
    energy_wh: float
    grid_energy_wh: float | None
    emissions_g: float | None  # None: some hour was unpriced
    run_now_g: float | None
    greedy_g: float | None
    kb_runs: int  # this study's runs in the knowledge base
    datacenters: list[str] = field(default_factory=list)


def _hours(rows: list[dict[str, Any]]) -> dict[str, list[tuple[datetime, float]]]:
    """Each job's IT energy per clock hour, in order (a migration hour summed over both sites)."""
    energy: dict[str, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        energy[str(row["job_id"])][row["hour"]] += float(row["energy_wh"])
    return {job: sorted(hours.items()) for job, hours in energy.items()}


class Forecasts:
    """Median intensity per region and hour as known at a moment (latest issue at or before it)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.points: dict[tuple[str, datetime], list[tuple[datetime, float]]] = defaultdict(list)
        for row in rows:
            self.points[(row["region"], row["hour"])].append((row["issued_at"], row["g_per_kwh"]))
        for issues in self.points.values():
            issues.sort()

    def at(self, region: str, hour: datetime, known_at: datetime) -> float | None:
        issues = self.points.get((region, hour), [])
        earlier = [g for issued, g in issues if issued <= known_at]
        if earlier:
            return earlier[-1]
        return issues[0][1] if issues else None  # only a later issue covered it


def _floor_hour(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)


def _priced(
    hours: list[tuple[datetime, float]],
    start: datetime,
    known_at: datetime,
    site: str,
    registry: Registry,
    forecasts: Forecasts,
) -> float | None:
    """gCO2eq of the measured energy profile run without a break at ``site`` from ``start``."""
    dc = registry.get(site)
    total = 0.0
    for k, (_, wh) in enumerate(hours):
        g = forecasts.at(dc.region, start + timedelta(hours=k), known_at)
        if g is None:
            return None
        total += wh / 1000.0 * dc.pue * g
    return total


def _total(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _baselines(
    requests: list[dict[str, Any]],
    hours: dict[str, list[tuple[datetime, float]]],
    registry: Registry,
    forecasts: Forecasts,
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Per job: gCO2eq run now at home, and placed greedily (see the module's docstring)."""
    run_now: dict[str, float | None] = {}
    greedy: dict[str, float | None] = {}
    busy: dict[tuple[str, datetime], int] = defaultdict(int)
    for req in sorted(requests, key=lambda r: (r["requested_at"], str(r["job_id"]))):
        job = str(req["job_id"])
        profile = hours.get(job)
        if not profile:
            continue
        spec, known = req["spec"], req["requested_at"]
        start = _floor_hour(known)
        home = req["home_datacenter"] or spec.get("home_datacenter")
        run_now[job] = _priced(profile, start, known, home, registry, forecasts)
        allowed = registry.in_group(spec.get("region_group"))
        span = range(len(profile))
        for delay in range(24 * 7):
            first = start + timedelta(hours=delay)
            free = [
                dc
                for dc in allowed
                if all(busy[(dc.name, first + timedelta(hours=k))] < dc.gpus for k in span)
            ]
            if free:
                priced = [
                    (_priced(profile, first, known, dc.name, registry, forecasts), dc)
                    for dc in free
                ]
                known_prices = [(g, dc) for g, dc in priced if g is not None]
                if not known_prices:
                    greedy[job] = None
                    break
                g, chosen = min(known_prices, key=lambda item: (item[0], item[1].name))
                greedy[job] = g
                for k in span:
                    busy[(chosen.name, first + timedelta(hours=k))] += 1
                break
        else:
            greedy[job] = None
    return run_now, greedy


def closing_table(
    database_url: str, studies: dict[UUID, str], registry: Registry
) -> list[StudyRow]:
    """One row per study (``studies``: id -> name), from the database."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        ids = [str(s) for s in studies]
        requests = conn.execute(
            "SELECT r.job_id, r.study_id, r.requested_at, r.home_datacenter, s.spec, "
            "r.predicted_metric, r.predicted_metric_std "
            "FROM job_requests r JOIN studies s USING (study_id) WHERE r.study_id = ANY(%s::uuid[])",
            (ids,),
        ).fetchall()
        results = conn.execute(
            "SELECT job_id, study_id, status, early_stopped, metrics, energy_wh, majority_baseline "
            "FROM run_results WHERE study_id = ANY(%s::uuid[])",
            (ids,),
        ).fetchall()
        energy_rows = conn.execute(
            "SELECT job_id, hour, datacenter, energy_wh, emissions_g FROM job_energy "
            "WHERE job_id = ANY(%s::uuid[])",
            ([str(r["job_id"]) for r in requests],),
        ).fetchall()
        forecasts = Forecasts(
            conn.execute(
                "SELECT region, hour, issued_at, g_per_kwh FROM forecast_points WHERE region = ANY(%s)",
                (registry.regions(),),
            ).fetchall()
        )
        kb = {
            r["study_id"]: r["count"]
            for r in conn.execute(
                "SELECT study_id::text AS study_id, count(*) AS count FROM kb_runs "
                "WHERE study_id = ANY(%s::uuid[]) GROUP BY 1",
                (ids,),
            ).fetchall()
        }
    hours = _hours(energy_rows)
    run_now_of, greedy_of = _baselines(requests, hours, registry, forecasts)
    rows: list[StudyRow] = []
    for study_id, name in studies.items():
        sid = str(study_id)
        mine = [r for r in results if str(r["study_id"]) == sid]
        reqs = {str(r["job_id"]) for r in requests if str(r["study_id"]) == sid}
        metered = [e for e in energy_rows if str(e["job_id"]) in reqs]
        emissions = (
            None
            if any(e["emissions_g"] is None for e in metered)
            else sum(e["emissions_g"] for e in metered)
        )
        full = [
            float(r["energy_wh"])
            for r in mine
            if r["status"] == "completed" and not r["early_stopped"]
        ]
        scored = [
            r
            for r in mine
            if r["status"] == "completed" and (r["metrics"] or {}).get("accuracy") is not None
        ]
        best = max(scored, key=lambda r: float(r["metrics"]["accuracy"]), default=None)
        published = next(  # the prediction published for the best trial when it was requested
            (q for q in requests if best is not None and str(q["job_id"]) == str(best["job_id"])),
            {},
        )
        majority = [r["majority_baseline"] for r in mine if r["majority_baseline"] is not None]
        run_now = _total([run_now_of.get(j) for j in reqs if j in hours])
        greedy = _total([greedy_of.get(j) for j in reqs if j in hours])
        rows.append(
            StudyRow(
                study_id=sid,
                name=name,
                trials=len(mine),
                completed=sum(r["status"] == "completed" for r in mine),
                early_stopped=sum(bool(r["early_stopped"]) for r in mine),
                failed=sum(r["status"] == "failed" for r in mine),
                grid=GRID_SIZE,
                best_accuracy=None if best is None else float(best["metrics"]["accuracy"]),
                best_predicted=published.get("predicted_metric"),
                best_predicted_std=published.get("predicted_metric_std"),
                majority_baseline=max(majority) if majority else None,
                energy_wh=sum(float(e["energy_wh"]) for e in metered),
                grid_energy_wh=GRID_SIZE * sum(full) / len(full) if full else None,
                emissions_g=emissions,
                run_now_g=run_now,
                greedy_g=greedy,
                kb_runs=int(kb.get(sid, 0)),
                datacenters=sorted({e["datacenter"] for e in metered}),
            )
        )
    return rows
