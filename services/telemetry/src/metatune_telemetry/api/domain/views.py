"""What the dashboard shows per job, per datacenter and per study (pure: no database, no HTML).

* A job's timeline: where and when it ran (its hourly energy, merged into stretches per
  datacenter), where the latest plan put it, its assignments, and its emissions against the
  **run-now baseline** of :mod:`metatune.emissions` (its metered energy at its home datacenter
  from the hour it was requested, priced with the forecast in force then). An hour no forecast
  covers leaves the baseline unknown (``None`` and the reason), never 0.
* A datacenter's forecast curves: the latest issues for its grid region, median with p10/p90.
* A study's trials: the objective the recommender predicted against the one the run reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from metatune.display import chance_baseline, trial_outcome

HOUR = timedelta(hours=1)


class Stretch(BaseModel):
    """Consecutive clock hours at one datacenter."""

    datacenter: str
    start: datetime
    hours: int
    facility_energy_kwh: float | None = None
    kgco2eq: float | None = (
        None  # None: an hour of it is unpriced (ran) or not split by hour (planned)
    )

    @property
    def end(self) -> datetime:
        return self.start + self.hours * HOUR


def stretches(hours: Iterable[tuple[datetime, str, float | None, float | None]]) -> list[Stretch]:
    """(hour, datacenter, facility Wh, g or None) rows, merged where the same datacenter runs on
    into the next hour; a stretch's kg is unknown as soon as one of its hours is."""
    out: list[Stretch] = []
    for hour, datacenter, wh, grams in sorted(hours, key=lambda h: (h[1], h[0])):
        last = out[-1] if out else None
        kwh = None if wh is None else wh / 1000
        kg = None if grams is None else grams / 1000
        if last is not None and last.datacenter == datacenter and last.end == hour:
            last.hours += 1
            last.facility_energy_kwh = _add(last.facility_energy_kwh, kwh)
            last.kgco2eq = _add(last.kgco2eq, kg)
        else:
            out.append(
                Stretch(
                    datacenter=datacenter, start=hour, hours=1, facility_energy_kwh=kwh, kgco2eq=kg
                )
            )
    return sorted(out, key=lambda s: s.start)


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


class Baseline(BaseModel):
    datacenter: str | None
    hours: list[datetime]
    kgco2eq: float | None
    missing: str | None = None  # why kgco2eq is unknown


class Mark(BaseModel):
    at: datetime
    datacenter: str
    action: str


class JobTimeline(BaseModel):
    job_id: UUID
    study_id: UUID | None
    trial_index: int | None
    status: str  # completed | failed | running | requested
    home_datacenter: str | None
    ran: list[Stretch]
    plan_version: int | None
    planned: list[Stretch]
    planned_kgco2eq: float | None
    assignments: list[Mark]
    baseline: Baseline
    # ran hours are priced at their realised intensity where observed (``realised_hours``), at the
    # forecast's otherwise (``forecast_priced_hours``); every hour at the forecast price beside it
    forecast_kgco2eq: float | None = None
    realised_hours: int = 0
    forecast_priced_hours: int = 0

    @property
    def facility_energy_kwh(self) -> float:
        return sum(s.facility_energy_kwh or 0.0 for s in self.ran)

    @property
    def kgco2eq(self) -> float | None:
        """The run's emissions so far; None while any hour of it is unpriced (or it has not run)."""
        if not self.ran or any(s.kgco2eq is None for s in self.ran):
            return None
        return sum(s.kgco2eq or 0.0 for s in self.ran)


class ForecastCurve(BaseModel):
    issued_at: datetime
    model_version: str
    stale: bool
    hours: list[datetime]
    g_per_kwh: list[float]
    p10_g_per_kwh: list[float]
    p90_g_per_kwh: list[float]


class DatacenterForecast(BaseModel):
    datacenter: str
    region: str | None
    curves: list[ForecastCurve]  # latest issue first


class StudyListing(BaseModel):
    """One line of the dashboard's index: a study and how far it got."""

    study_id: UUID
    name: str | None
    submitted_at: datetime
    base_model: str
    task: str
    trials_requested: int
    trials_finished: int
    best_accuracy: float | None
    # the baselines beside it: always the most common label; guessing (1 / the classes profiled)
    majority_baseline: float | None = None
    chance_baseline: float | None = None
    # the deadline as an outcome of the runs ended so far (metatune.deadlines)
    deadline: datetime | None = None
    deadline_met: bool | None = None  # None: no run ended yet
    trials_late: int = 0
    late_by_s: float | None = None
    deadline_cell: str = "-"  # "met", "1 late, by 30 min"


class Trial(BaseModel):
    job_id: UUID
    trial_index: int
    status: str
    metric_name: str  # the objective compared (higher is better), or val_loss where only a loss was predicted
    predicted: float | None
    predicted_std: float | None
    actual: float | None
    # accuracy of always predicting the most common label: what an accuracy must beat
    majority_baseline: float | None = None
    # accuracy of guessing: 1 / the classes the study's profile counted (None: unknown, or a causal LM)
    chance_baseline: float | None = None


def objective(metric_name: str, metrics: Mapping[str, Any] | None) -> float | None:
    """The value of ``metric_name`` a run reached (the recommender's objectives: accuracy,
    neg_perplexity, neg_val_loss; any other name is read as is)."""
    if not metrics:
        return None
    negated = metric_name.removeprefix("neg_")
    value = metrics.get(negated)
    if value is None:
        return None
    return -float(value) if metric_name.startswith("neg_") else float(value)


def trial(
    job_id: UUID,
    trial_index: int,
    status: str | None,
    metric_name: str | None,
    predicted_metric: float | None,
    predicted_metric_std: float | None,
    predicted_loss: float | None,
    predicted_loss_std: float | None,
    metrics: Mapping[str, Any] | None,
    early_stopped: bool | None = None,
    stop_reason: str | None = None,
    steps: int | None = None,
    majority_baseline: float | None = None,
    n_classes: int | None = None,
) -> Trial:
    """A trial's prediction and outcome; a trial predicted by loss only is compared on val_loss."""
    if predicted_metric is None and predicted_loss is not None:
        metric_name, predicted_metric, predicted_metric_std = (
            "val_loss",
            predicted_loss,
            predicted_loss_std,
        )
    name = metric_name or "metric"
    return Trial(
        job_id=job_id,
        trial_index=trial_index,
        status=trial_outcome(
            status or "running", early_stopped=early_stopped, stop_reason=stop_reason, steps=steps
        ),
        metric_name=name,
        predicted=predicted_metric,
        predicted_std=predicted_metric_std,
        actual=objective(name, metrics),
        majority_baseline=majority_baseline,
        chance_baseline=chance_baseline(n_classes),
    )
