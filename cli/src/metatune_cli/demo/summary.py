"""The demo's closing table, computed from what the platform recorded (telemetry's read API and the
recommender's knowledge base, each asked through its own interface), not from what the demo saw
on the bus.

Per study:

* **trials** run (completed, early-stopped, failed) against **the grid** of the same search space
  a user would otherwise sweep (:func:`metatune.knowledge.space.grid`, :data:`GRID_SIZE`
  configurations); its energy is the grid's size x the study's mean energy per full-length trial.
* **best** accuracy of the study's runs (of equally accurate ones, the earliest trial's, whose
  published prediction stands beside it); **energy** (IT Wh) and **gCO2eq** as metered hour by
  hour (telemetry's ``/api/studies/{id}/records``).
* **run now at home**: telemetry's baseline of each trial (``run_now_g`` of its records), the
  rule of :mod:`metatune.emissions` every view uses: the measured energy, hour by hour, run
  without a break from the hour it was requested at its home datacenter (the user's own cluster,
  no queue), at the forecast price in force at the request.
* **greedy**: the same measured energy priced, taking the trials in the order they were
  requested, at the datacenter with the least emissions among those its residency allows that
  have a GPU free from the earliest hour one does (the platform's GPUs, no look-ahead), each at
  that site's PUE and the forecast price in force at the request (telemetry's
  ``/api/regions/{region}/forecasts``), by :func:`metatune.emissions.priced_at`.
* **deadline**: whether every ended trial ended by the study's deadline, else how many did not
  and by how much the latest was late (:mod:`metatune.deadlines`).
* **kb runs**: the study's runs in the knowledge base, as the recommender counts them
  (``metatune.requests.knowledge.runs``), passed in.

No database is read here: the tools meet the services only through their interfaces.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import httpx

from metatune.contracts import RegionGroup
from metatune.deadlines import deadline_outcome
from metatune.emissions import ForecastsInForce, energy_profile, floor_hour, priced_at, total
from metatune.knowledge.space import grid
from metatune.registry import Registry

GRID_SIZE = len(grid())
GREEDY_DELAYS_H = 24 * 7  # how many start hours the greedy placement tries
HISTORY_CHUNK = timedelta(days=14)  # the most telemetry answers of a forecast history at once
HOUR = timedelta(hours=1)


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
    best_predicted_interval: tuple[float, float] | None  # 80 %
    majority_baseline: float | None  # accuracy of always predicting the most common label
    energy_wh: float
    grid_energy_wh: float | None
    emissions_g: float | None  # None: some hour was unpriced
    run_now_g: float | None
    greedy_g: float | None
    kb_runs: int  # this study's runs in the knowledge base
    datacenters: list[str] = field(default_factory=list)
    # 1 / the classes the profiler counted (metatune.datasets.profiled): guessing uniformly
    chance_baseline: float | None = None
    # completed trials whose accuracy fell inside the 80 % interval published with them, of those
    # with one
    inside_interval: int = 0
    with_interval: int = 0
    # the deadline as an outcome (metatune.deadlines): None without a deadline or an ended trial
    deadline_met: bool | None = None
    trials_late: int = 0
    late_by_s: float | None = None
    deadline_cell: str = "-"


@dataclass(frozen=True)
class Metered:
    """One metered job-hour at one datacenter (``EnergyHour`` of telemetry's records)."""

    hour: datetime
    datacenter: str
    energy_wh: float
    emissions_g: float | None


@dataclass(frozen=True)
class Trial:
    """A trial as telemetry recorded it (``TrialRecord`` of ``/api/studies/{id}/records``)."""

    job_id: str
    study_id: str
    trial_index: int | None
    requested_at: datetime | None
    home_datacenter: str | None
    region_group: RegionGroup | None
    predicted_metric: float | None
    predicted_metric_std: float | None
    predicted_metric_interval: tuple[float, float] | None
    status: str | None
    early_stopped: bool
    accuracy: float | None
    energy_wh: float | None
    majority_baseline: float | None
    hours: list[Metered]
    run_now_g: float | None = None  # telemetry's run-now-at-home baseline (metatune.emissions)
    ended_at: datetime | None = None
    deadline: datetime | None = None  # its study's

    @classmethod
    def of(cls, study_id: str, record: Mapping[str, Any], deadline: str | None = None) -> Trial:
        requested, group = record["requested_at"], record["region_group"]
        ended = record.get("ended_at")
        return cls(
            job_id=record["job_id"],
            study_id=study_id,
            trial_index=record["trial_index"],
            requested_at=None if requested is None else datetime.fromisoformat(requested),
            home_datacenter=record["home_datacenter"],
            region_group=None if group is None else RegionGroup(group),
            predicted_metric=record["predicted_metric"],
            predicted_metric_std=record["predicted_metric_std"],
            predicted_metric_interval=_pair(record.get("predicted_metric_interval")),
            status=record["status"],
            early_stopped=record["early_stopped"],
            accuracy=record["metrics"].get("accuracy"),
            energy_wh=record["energy_wh"],
            majority_baseline=record["majority_baseline"],
            hours=[
                Metered(
                    hour=datetime.fromisoformat(h["hour"]),
                    datacenter=h["datacenter"],
                    energy_wh=h["energy_wh"],
                    emissions_g=h["emissions_g"],
                )
                for h in record["hours"]
            ],
            run_now_g=record.get("run_now_g"),
            ended_at=None if ended is None else datetime.fromisoformat(ended),
            deadline=None if deadline is None else datetime.fromisoformat(deadline),
        )

    @property
    def requested(self) -> bool:
        return self.requested_at is not None

    @property
    def ended(self) -> bool:
        return self.status is not None


def _profile(trial: Trial) -> list[tuple[datetime, float]]:
    return energy_profile((h.hour, h.energy_wh) for h in trial.hours)


def _priced(
    profile: list[tuple[datetime, float]],
    start: datetime,
    known_at: datetime,
    site: str,
    registry: Registry,
    forecasts: ForecastsInForce,
) -> float | None:
    """gCO2eq of the measured energy profile run without a break at ``site`` from ``start``."""
    dc = registry.get(site)
    return priced_at(profile, start, known_at, dc.region, dc.pue, forecasts).grams


def _greedy(
    requests: list[Trial],
    hours: dict[str, list[tuple[datetime, float]]],
    registry: Registry,
    forecasts: ForecastsInForce,
) -> dict[str, float | None]:
    """Per job: gCO2eq placed greedily (see the module's docstring)."""
    greedy: dict[str, float | None] = {}
    busy: dict[tuple[str, datetime], int] = defaultdict(int)
    for req in sorted(requests, key=lambda r: (r.requested_at, r.job_id)):
        job, known = req.job_id, req.requested_at
        profile = hours.get(job)
        if not profile or known is None or req.home_datacenter is None:
            continue
        start = floor_hour(known)
        allowed = registry.in_group(req.region_group)
        span = range(len(profile))
        for delay in range(GREEDY_DELAYS_H):
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
    return greedy


async def _get(client: httpx.AsyncClient, path: str, **params: str) -> Any:
    response = await client.get(path, params=params)
    response.raise_for_status()
    return response.json()


async def study_trials(client: httpx.AsyncClient, studies: list[UUID]) -> list[Trial]:
    """Every trial of ``studies`` as telemetry recorded it."""
    out = []
    for study in studies:
        records = await _get(client, f"/api/studies/{study}/records")
        deadline = records.get("deadline")
        out += [Trial.of(str(study), record, deadline) for record in records["trials"]]
    return out


async def forecasts_for(
    client: httpx.AsyncClient, trials: list[Trial], registry: Registry
) -> ForecastsInForce:
    """The forecast history of every region of ``registry`` over the hours the baselines price:
    from the first request's hour to the last one's plus the greedy placement's delays and the
    longest run."""
    requested = [t.requested_at for t in trials if t.requested_at is not None]
    if not requested:
        return ForecastsInForce([])
    longest = max((len(_profile(t)) for t in trials), default=0)
    start = floor_hour(min(requested))
    end = floor_hour(max(requested)) + (GREEDY_DELAYS_H + longest) * HOUR
    rows: list[tuple[str, datetime, datetime, float, float, float]] = []
    for region in registry.regions():
        at = start
        while at < end:
            upto = min(end, at + HISTORY_CHUNK)
            history = await _get(
                client,
                f"/api/regions/{region}/forecasts",
                **{"from": at.isoformat()},
                to=upto.isoformat(),
            )
            for curve in history["curves"]:
                issued = datetime.fromisoformat(curve["issued_at"])
                rows += [
                    (region, datetime.fromisoformat(hour), issued, low, g, high)
                    for hour, low, g, high in zip(
                        curve["hours"],
                        curve["p10_g_per_kwh"],
                        curve["g_per_kwh"],
                        curve["p90_g_per_kwh"],
                        strict=True,
                    )
                ]
            at = upto
    return ForecastsInForce(rows)


async def closing_table(
    client: httpx.AsyncClient,
    studies: dict[UUID, str],
    registry: Registry,
    kb_runs: Mapping[str, int],
) -> list[StudyRow]:
    """One row per study (``studies``: id -> name), from telemetry's read API (``client``: its
    base URL and token); ``kb_runs``: each study's runs in the knowledge base, by id as text."""
    trials = await study_trials(client, list(studies))
    return study_rows(
        trials, await forecasts_for(client, trials, registry), studies, registry, kb_runs
    )


def _rank(trial: Trial) -> tuple[float, int]:
    """The best trial: the highest accuracy, of equal ones the earliest trial."""
    index = trial.trial_index if trial.trial_index is not None else 1 << 30
    return (trial.accuracy or 0.0, -index)


def study_rows(
    trials: list[Trial],
    forecasts: ForecastsInForce,
    studies: dict[UUID, str],
    registry: Registry,
    kb_runs: Mapping[str, int],
) -> list[StudyRow]:
    """The rows of :func:`closing_table` from what it fetched (no I/O)."""
    requests = [t for t in trials if t.requested]
    hours = {t.job_id: p for t in requests if (p := _profile(t))}
    greedy_of = _greedy(requests, hours, registry, forecasts)
    run_now_of = {t.job_id: t.run_now_g for t in requests}
    rows: list[StudyRow] = []
    for study_id, name in studies.items():
        sid = str(study_id)
        mine = [t for t in trials if t.study_id == sid and t.ended]
        reqs = [t for t in requests if t.study_id == sid]
        metered = [h for t in reqs for h in t.hours]
        emissions = total(h.emissions_g for h in metered)
        full = [t.energy_wh or 0.0 for t in mine if t.status == "completed" and not t.early_stopped]
        scored = [t for t in mine if t.status == "completed" and t.accuracy is not None]
        best = max(scored, key=_rank, default=None)
        # the prediction published for the best trial when it was requested
        published = next((t for t in reqs if best is not None and t.job_id == best.job_id), None)
        majority = [t.majority_baseline for t in mine if t.majority_baseline is not None]
        ids = [t.job_id for t in reqs if t.job_id in hours]
        deadline = next((t.deadline for t in mine if t.deadline is not None), None)
        ends = [t.ended_at for t in mine if t.ended_at is not None]
        outcome = None if deadline is None or not ends else deadline_outcome(deadline, ends)
        rows.append(
            StudyRow(
                study_id=sid,
                name=name,
                trials=len(mine),
                completed=sum(t.status == "completed" for t in mine),
                early_stopped=sum(t.early_stopped for t in mine),
                failed=sum(t.status == "failed" for t in mine),
                grid=GRID_SIZE,
                best_accuracy=None if best is None else best.accuracy,
                best_predicted=None if published is None else published.predicted_metric,
                best_predicted_std=None if published is None else published.predicted_metric_std,
                best_predicted_interval=None
                if published is None
                else published.predicted_metric_interval,
                inside_interval=sum(_inside(t) is True for t in scored),
                with_interval=sum(_inside(t) is not None for t in scored),
                majority_baseline=max(majority) if majority else None,
                energy_wh=sum(h.energy_wh for h in metered),
                grid_energy_wh=GRID_SIZE * sum(full) / len(full) if full else None,
                emissions_g=emissions,
                run_now_g=total(run_now_of.get(j) for j in ids),
                greedy_g=total(greedy_of.get(j) for j in ids),
                kb_runs=int(kb_runs.get(sid, 0)),
                datacenters=sorted({h.datacenter for h in metered}),
                deadline_met=None if outcome is None else outcome.met,
                trials_late=0 if outcome is None else outcome.late,
                late_by_s=None if outcome is None else outcome.late_by_s,
                deadline_cell="-" if outcome is None else outcome.cell(),
            )
        )
    return rows


def _pair(value: Any) -> tuple[float, float] | None:
    return None if not value else (float(value[0]), float(value[1]))


def _inside(trial: Trial) -> bool | None:
    """Whether a completed trial's accuracy fell inside its published interval (None: no interval
    or no accuracy)."""
    band = trial.predicted_metric_interval
    if band is None or trial.accuracy is None:
        return None
    return band[0] <= trial.accuracy <= band[1]
