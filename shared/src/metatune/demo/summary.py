"""The demo's closing table, computed from the database (telemetry's tables and the knowledge
base), not from what the demo saw on the bus.

Per study:

* **trials** run (completed, early-stopped, failed) against **the grid** of the same search space
  a user would otherwise sweep: every LoRA rank x batch size of the space at three learning rates
  (:data:`GRID_SIZE` configurations); its energy is the grid's size x the study's mean energy per
  full-length trial.
* **best** accuracy of the study's runs; **energy** (IT Wh) and **kgCO2eq** as metered hour by hour
  (``job_energy``).
* **run now at home** and **greedy**: the same measured energy, hour by hour, priced as if each
  trial had started in the hour it was requested and run without a break at the study's home
  datacenter (run now at home) or at the cleanest datacenter it may use in that hour (greedy),
  each at that site's PUE and the median intensity of the forecast in force when it was requested.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from ..knowledge.space import BATCH_SIZES, RANKS
from ..registry import Registry

GRID_LEARNING_RATES = (1e-4, 5e-4, 2e-3)
GRID_SIZE = len(RANKS) * len(BATCH_SIZES) * len(GRID_LEARNING_RATES)


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
    energy_wh: float
    grid_energy_wh: float | None
    emissions_g: float | None  # None: some hour was unpriced
    run_now_g: float | None
    greedy_g: float | None
    kb_runs: int  # this study's runs in the knowledge base
    datacenters: list[str] = field(default_factory=list)


def _hours(rows: list[dict[str, Any]]) -> dict[str, list[tuple[datetime, float]]]:
    energy: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for row in rows:
        energy[str(row["job_id"])].append((row["hour"], float(row["energy_wh"])))
    for hours in energy.values():
        hours.sort()
    return energy


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


def closing_table(
    database_url: str, studies: dict[UUID, str], registry: Registry
) -> list[StudyRow]:
    """One row per study (``studies``: id -> name), from the database."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        ids = [str(s) for s in studies]
        requests = conn.execute(
            "SELECT r.job_id, r.study_id, r.requested_at, r.home_datacenter, s.spec "
            "FROM job_requests r JOIN studies s USING (study_id) WHERE r.study_id = ANY(%s::uuid[])",
            (ids,),
        ).fetchall()
        results = conn.execute(
            "SELECT job_id, study_id, status, early_stopped, metrics, energy_wh "
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
    rows: list[StudyRow] = []
    for study_id, name in studies.items():
        sid = str(study_id)
        mine = [r for r in results if str(r["study_id"]) == sid]
        reqs = {str(r["job_id"]): r for r in requests if str(r["study_id"]) == sid}
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
        accuracies = [
            float(r["metrics"]["accuracy"])
            for r in mine
            if r["status"] == "completed" and (r["metrics"] or {}).get("accuracy") is not None
        ]
        run_now: float | None = 0.0
        greedy: float | None = 0.0
        for job_id, req in reqs.items():
            profile = hours.get(job_id, [])
            if not profile:
                continue
            spec = req["spec"]
            start = _floor_hour(req["requested_at"])
            home = req["home_datacenter"] or spec.get("home_datacenter")
            allowed = [dc.name for dc in registry.in_group(spec.get("region_group"))]
            at_home = _priced(profile, start, req["requested_at"], home, registry, forecasts)
            options = [
                _priced(profile, start, req["requested_at"], dc, registry, forecasts)
                for dc in allowed
            ]
            priced = [o for o in options if o is not None]
            run_now = None if run_now is None or at_home is None else run_now + at_home
            greedy = None if greedy is None or not priced else greedy + min(priced)
        rows.append(
            StudyRow(
                study_id=sid,
                name=name,
                trials=len(mine),
                completed=sum(r["status"] == "completed" for r in mine),
                early_stopped=sum(bool(r["early_stopped"]) for r in mine),
                failed=sum(r["status"] == "failed" for r in mine),
                grid=GRID_SIZE,
                best_accuracy=max(accuracies) if accuracies else None,
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
