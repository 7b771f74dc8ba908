"""When a study has ended, and the ``study.completed`` notification that says so (pure).

``StudyStopped`` only means the recommender requests no more trials: trials may still run. A
study has ended when it has stopped AND every trial it requested has reached a final state: a
run completed (early-stopped included) or failed, or the job was cancelled. The facts are read
from the database when an event that can end a study is stored (:func:`ending_ref`), in either
order; the notification's id is derived from the study alone, so however often the check
passes (redelivered events, a cancelled job whose run then fails) the outbox holds it once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from pydantic import BaseModel, Field

from metatune import contracts as c
from metatune.deadlines import deadline_outcome, outcome_fields

from ...api.domain.views import objective
from .notifications import Notification, envelope

EVENT_TYPE = "study.completed"
DEFAULT_METRIC = "neg_val_loss"  # what a study without a named objective is ranked on
_NAMESPACE = UUID("5f0c3c0e-8d53-4c1e-9f7a-3b7a1f2c6d90")  # of study.completed notification ids


def ending_ref(event: c.Event) -> UUID | None:
    """The study (or, where the event names none, the job) whose end ``event`` may complete."""
    if isinstance(event, c.StudyStopped):
        return event.study_id
    if isinstance(event, c.RunCompleted | c.RunFailed | c.JobCancelled):
        return event.study_id or event.job_id
    return None


@dataclass(frozen=True)
class TrialFacts:
    """One requested trial as stored: how it ended (None: not yet) and what its run reported."""

    job_id: UUID
    outcome: str | None  # completed | failed | cancelled
    config: Mapping[str, Any] | None = None
    metrics: Mapping[str, Any] | None = None
    metric_name: str | None = None
    early_stopped: bool = False
    adapter_key: str | None = None
    energy_wh: float = 0.0
    emissions_g: float = 0.0
    ended_at: datetime | None = None  # when its run ended (None: not run to an end)


@dataclass(frozen=True)
class StudyFacts:
    study_id: UUID
    name: str | None
    trials_requested: int | None  # as StudyStopped stated it; None: not stopped
    metric_name: str | None  # the objective StudyStopped named
    trials: Sequence[TrialFacts]
    deadline: datetime | None = None  # as submitted (None: the submission is not stored)


class BestTrial(BaseModel):
    job_id: UUID
    config: dict[str, Any] | None = Field(description="the LoRA configuration it trained")
    metric: float = Field(description="the objective it reached (higher is better)")
    metric_name: str = Field(description="accuracy, neg_perplexity, neg_val_loss...")
    adapter_key: str | None = Field(description="its adapter in the object store bucket adapters")


class TrialCounts(BaseModel):
    requested: int
    completed: int
    early_stopped: int
    failed: int
    cancelled: int


class StudyCompleted(BaseModel):
    """The ``data`` of a ``study.completed`` notification."""

    study_id: UUID
    name: str | None
    trials: TrialCounts
    best: BestTrial | None = Field(description="None: no trial completed with the objective")
    energy_kwh: float = Field(description="IT energy of the study's runs, as they reported it")
    emissions_g: float = Field(description="gCO2eq of the study's runs, as they reported it")
    deadline: datetime | None = Field(None, description="the study's deadline (UTC)")
    deadline_met: bool | None = Field(
        None,
        description="whether every run ended by the deadline (null: no deadline stored, or no "
        "run ended)",
    )
    trials_late: int = Field(0, description="runs that ended after the deadline")
    late_by_s: float | None = Field(
        None, description="how long after the deadline the latest run ended, seconds"
    )
    deadline_outcome: str | None = Field(
        None,
        description="in words: 'met its deadline' or 'finished after its deadline (1 trial late, "
        "by 2 h 06 min)'",
    )


def completion(facts: StudyFacts) -> StudyCompleted | None:
    """What the study's end notification says, or None while the study has not ended."""
    if facts.trials_requested is None or len(facts.trials) < facts.trials_requested:
        return None  # not stopped, or a requested trial not stored yet
    if any(t.outcome is None for t in facts.trials):
        return None
    outcomes = [t.outcome for t in facts.trials]
    completed = [t for t in facts.trials if t.outcome == "completed"]
    ends = [t.ended_at for t in facts.trials if t.ended_at is not None]
    late = None if facts.deadline is None or not ends else deadline_outcome(facts.deadline, ends)
    return StudyCompleted(
        study_id=facts.study_id,
        name=facts.name,
        trials=TrialCounts(
            requested=len(facts.trials),
            completed=len(completed),
            early_stopped=sum(t.early_stopped for t in completed),
            failed=outcomes.count("failed"),
            cancelled=outcomes.count("cancelled"),
        ),
        best=_best(completed, facts.metric_name),
        energy_kwh=sum(t.energy_wh for t in facts.trials) / 1000,
        emissions_g=sum(t.emissions_g for t in facts.trials),
        deadline=facts.deadline,
        **outcome_fields(late),
    )


def _best(completed: Sequence[TrialFacts], study_metric: str | None) -> BestTrial | None:
    ranked = []
    for t in completed:
        name = study_metric or t.metric_name or DEFAULT_METRIC
        value = objective(name, t.metrics)
        if value is not None:
            ranked.append((value, name, t))
    if not ranked:
        return None
    value, name, best = max(ranked, key=lambda r: r[0])
    return BestTrial(
        job_id=best.job_id,
        config=dict(best.config) if best.config is not None else None,
        metric=value,
        metric_name=name,
        adapter_key=best.adapter_key,
    )


def completion_notification(study_id: UUID) -> Notification:
    """The study's one end notification: its id (``webhook-id``) depends on the study alone."""
    return Notification(
        f"study:{study_id}",
        "completed",
        EVENT_TYPE,
        study_id,
        uuid5(_NAMESPACE, str(study_id)),
    )


def completion_body(done: StudyCompleted, at: datetime) -> str:
    """The JSON body; ``at``: when the event that ended the study occurred."""
    return envelope(EVENT_TYPE, at, done.model_dump(mode="json"))
