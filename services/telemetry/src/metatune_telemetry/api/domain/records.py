"""A study's trials as telemetry recorded them, and a grid region's forecast history (pure: no
database, no HTTP).

What someone re-pricing the platform's runs needs without reading telemetry's tables: per trial,
when it was requested and from which home and residency, the prediction published for it, how
its run ended (status, early stop, held-out metrics, the energy it reported, the majority-class
and chance baselines) and its metered energy and emissions hour by hour (``job_energy``: IT Wh, PUE and the
forecast intensity the agent charged); per grid region, every forecast issue's hourly points
within a window of hours (``forecast_points``), so the intensity known at any moment can be read
back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from metatune.display import chance_baseline

from .views import ForecastCurve

MAX_WINDOW = timedelta(days=14)  # a forecast history answers for at most this many hours


class EnergyHour(BaseModel):
    """One clock hour of a trial's run at one datacenter, as its agent metered it."""

    hour: datetime = Field(description="the clock hour (its start, UTC)")
    datacenter: str = Field(description="where the run drew the energy")
    energy_wh: float = Field(description="IT energy of the hour, Wh")
    pue: float = Field(description="the datacenter's PUE the hour was charged at")
    g_per_kwh: float | None = Field(
        description="the forecast intensity the agent charged, gCO2eq/kWh (null: unpriced)"
    )
    emissions_g: float | None = Field(
        description="energy x PUE x intensity, gCO2eq, as metered (null: unpriced)"
    )


class TrialRecord(BaseModel):
    """A trial of the study: its request, how its run ended and its metered hours."""

    job_id: UUID = Field(description="the trial's job id")
    trial_index: int | None = Field(description="0-based (null: a result without its request)")
    requested_at: datetime | None = Field(
        description="when the recommender requested it (null: no request stored)"
    )
    home_datacenter: str | None = Field(
        description="the request's home datacenter, else the study's"
    )
    region_group: str | None = Field(description="the study's data residency (null: anywhere)")
    metric_name: str | None = Field(description="the objective the prediction is of")
    predicted_metric: float | None = Field(
        description="the objective the recommender published before the trial trained"
    )
    predicted_metric_std: float | None = Field(description="its standard deviation")
    predicted_metric_interval: tuple[float, float] | None = Field(
        None, description="the 80 % interval published with it (null: none was)"
    )
    status: str | None = Field(
        description="completed or failed as the run ended (null: not ended yet)"
    )
    ended_at: datetime | None = Field(
        None, description="when its run ended, the platform's clock (null: not ended yet)"
    )
    early_stopped: bool = Field(description="a completion the early stopper cut short")
    metrics: dict[str, float | None] = Field(
        description="the run's held-out metrics (accuracy, val_loss, ...); empty before it ends"
    )
    energy_wh: float | None = Field(description="IT energy the run reported when it ended, Wh")
    majority_baseline: float | None = Field(
        description="accuracy of always predicting the most common training label"
    )
    chance_baseline: float | None = Field(
        description="accuracy of guessing: 1 / the classes the study's profile counted "
        "(null: not profiled, or a causal LM)"
    )
    hours: list[EnergyHour] = Field(description="its metered hours, in order")
    run_now_g: float | None = Field(
        None,
        description="gCO2eq of its metered energy run now at its home datacenter from the hour it "
        "was requested, at the forecast in force then (metatune.emissions; null: not metered yet "
        "or an hour without a forecast)",
    )


class StudyRecords(BaseModel):
    """Every trial of a study telemetry has recorded (``/api/studies/{id}/records``)."""

    study_id: UUID = Field(description="the study")
    deadline: datetime | None = Field(
        None, description="the study's deadline (null: its submission is not stored)"
    )
    trials: list[TrialRecord] = Field(description="by trial index; results without a request last")


class ForecastHistory(BaseModel):
    """Every forecast issue of a grid region with an hour in ``[start, end)``, oldest issue first,
    each cut to those hours (``/api/regions/{region}/forecasts``)."""

    region: str = Field(description="the grid region")
    start: datetime = Field(description="the first hour asked for")
    end: datetime = Field(description="the hour after the last one asked for")
    curves: list[ForecastCurve] = Field(description="one per issue, oldest first")


def window(start: datetime | None, end: datetime | None) -> str | None:
    """Why ``[start, end)`` is no window a forecast history answers for (None: it is one)."""
    if start is None or end is None:
        return "from and to are required: ISO 8601 instants with a timezone"
    if start.tzinfo is None or end.tzinfo is None:
        return "from and to need a timezone"
    if end <= start:
        return "to must be after from"
    if end - start > MAX_WINDOW:
        return f"at most {MAX_WINDOW.days * 24} hours at a time"
    return None


def forecast_history(
    region: str, start: datetime, end: datetime, points: Iterable[Mapping[str, Any]]
) -> ForecastHistory:
    """``points``: rows with ``issued_at``, ``model_version``, ``stale``, ``hour``, ``g_per_kwh``,
    ``p10_g_per_kwh``, ``p90_g_per_kwh``; grouped by issue, hours in order."""
    issues: dict[datetime, list[Mapping[str, Any]]] = defaultdict(list)
    for p in points:
        issues[p["issued_at"]].append(p)
    curves = []
    for issued in sorted(issues):
        rows = sorted(issues[issued], key=lambda p: p["hour"])
        curves.append(
            ForecastCurve(
                issued_at=issued,
                model_version=str(rows[0]["model_version"]),
                stale=any(bool(p["stale"]) for p in rows),
                hours=[p["hour"] for p in rows],
                g_per_kwh=[float(p["g_per_kwh"]) for p in rows],
                p10_g_per_kwh=[float(p["p10_g_per_kwh"]) for p in rows],
                p90_g_per_kwh=[float(p["p90_g_per_kwh"]) for p in rows],
            )
        )
    return ForecastHistory(region=region, start=start, end=end, curves=curves)


def study_records(
    study_id: UUID,
    spec: Mapping[str, Any] | None,
    requests: Iterable[Mapping[str, Any]],
    results: Iterable[Mapping[str, Any]],
    hours: Iterable[Mapping[str, Any]],
    n_classes: int | None = None,
    run_now_g: Mapping[Any, float | None] | None = None,
) -> StudyRecords:
    """``spec``: the study's submitted spec (None: not stored); ``requests`` / ``results``: its
    ``job_requests`` / ``run_results`` rows; ``hours``: the ``job_energy`` rows of their jobs;
    ``n_classes``: what its profile counted (None: not profiled); ``run_now_g``: each job's run-now
    baseline."""
    spec = spec or {}
    by_job: dict[Any, list[EnergyHour]] = defaultdict(list)
    for h in sorted(hours, key=lambda h: (h["hour"], h["datacenter"])):
        by_job[h["job_id"]].append(
            EnergyHour(
                hour=h["hour"],
                datacenter=h["datacenter"],
                energy_wh=float(h["energy_wh"]),
                pue=float(h["pue"]),
                g_per_kwh=h["g_per_kwh"],
                emissions_g=h["emissions_g"],
            )
        )
    asked = {q["job_id"]: q for q in requests}
    ended = {r["job_id"]: r for r in results}
    order = sorted(asked, key=lambda j: (asked[j]["trial_index"], str(j)))
    order += sorted((j for j in ended if j not in asked), key=str)
    trials = []
    for job in order:
        q, r = asked.get(job, {}), ended.get(job, {})
        trials.append(
            TrialRecord(
                job_id=job,
                trial_index=q.get("trial_index"),
                requested_at=q.get("requested_at"),
                home_datacenter=q.get("home_datacenter") or spec.get("home_datacenter"),
                region_group=spec.get("region_group"),
                metric_name=q.get("metric_name"),
                predicted_metric=q.get("predicted_metric"),
                predicted_metric_std=q.get("predicted_metric_std"),
                predicted_metric_interval=_interval(q),
                status=r.get("status"),
                ended_at=r.get("finished_at"),
                early_stopped=bool(r.get("early_stopped")),
                metrics=dict(r.get("metrics") or {}),
                energy_wh=r.get("energy_wh"),
                majority_baseline=r.get("majority_baseline"),
                chance_baseline=chance_baseline(n_classes),
                hours=by_job.get(job, []),
                run_now_g=(run_now_g or {}).get(job),
            )
        )
    return StudyRecords(study_id=study_id, deadline=spec.get("deadline"), trials=trials)


def _interval(request: Mapping[str, Any]) -> tuple[float, float] | None:
    low, high = request.get("predicted_metric_low"), request.get("predicted_metric_high")
    return None if low is None or high is None else (low, high)
