"""A platform run's end as a knowledge-base row, and a study's best so far (pure: no bus, no database).

The row is keyed by the job id, so however often a completion is delivered it is one row. The
dataset's meta-features come from the study's profile; a completion that arrives before the
profile is stored with ``profile_missing`` and filled when the profile comes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict
from uuid import UUID

from metatune.contracts import RunAccounting, RunCompleted, RunFailed, RunMetrics, TaskType
from metatune.knowledge import DatasetInfo, KbRun, Provenance, RunStatus, StudyBest
from metatune.knowledge.records import StudyProfile

PLATFORM_SOURCE = "platform"
UNKNOWN = "unknown"  # base model / task of a run whose event and study profile both lack them


def objective(metrics: RunMetrics) -> tuple[str, float | None]:
    """The run's objective, higher is better: accuracy where the task has one, else minus perplexity,
    else minus the validation loss."""
    if metrics.accuracy is not None:
        return "accuracy", metrics.accuracy
    if metrics.perplexity is not None:
        return "neg_perplexity", -metrics.perplexity
    return "neg_val_loss", -metrics.val_loss


def _dataset(study_id: UUID | None, job_id: UUID, profile: StudyProfile | None) -> DatasetInfo:
    if profile is not None:
        return DatasetInfo(
            name=profile.dataset_name,
            features=profile.features,
            n_train=profile.spec.budget.train_rows(profile.features.n_examples),
        )
    return DatasetInfo(name=f"study:{study_id}" if study_id else f"job:{job_id}")


def _emissions(accounting: RunAccounting) -> float | None:
    """None when no hour of the run had a carbon intensity to price it."""
    if accounting.hours and all(hour.g_per_kwh is None for hour in accounting.hours):
        return None
    return accounting.emissions_g


class _EndFields(TypedDict):
    """The row's fields that a completion and a failure fill the same way."""

    run_id: str
    study_id: UUID | None
    dataset: DatasetInfo
    base_model: str
    task: TaskType | str
    tokens: int
    tokens_with_padding: int
    wall_seconds: float
    gpu_hours: float
    energy_wh: float
    emissions_g: float | None
    datacenter: str | None
    provenance: Provenance


def _end_fields(event: RunCompleted | RunFailed, profile: StudyProfile | None) -> _EndFields:
    """Identity, dataset and accounting of a run's end; base model and task from the event, else
    from the study's spec."""
    spec = profile.spec if profile else None
    return _EndFields(
        run_id=str(event.job_id),
        study_id=event.study_id,
        dataset=_dataset(event.study_id, event.job_id, profile),
        base_model=event.base_model or (spec.base_model if spec else UNKNOWN),
        task=event.task or (spec.task if spec else UNKNOWN),
        tokens=event.accounting.tokens_seen,
        tokens_with_padding=event.accounting.tokens_with_padding,
        wall_seconds=event.accounting.wall_seconds,
        gpu_hours=event.accounting.gpu_hours,
        energy_wh=event.accounting.energy_wh,
        emissions_g=_emissions(event.accounting),
        datacenter=event.datacenter,
        provenance=Provenance(source=PLATFORM_SOURCE, created_at=event.occurred_at),
    )


def completed_run(event: RunCompleted, profile: StudyProfile | None) -> KbRun:
    metric_name, metric = objective(event.metrics)
    return KbRun(
        **_end_fields(event, profile),
        config=event.config.model_dump(mode="json"),
        status=RunStatus.early_stopped if event.early_stopped else RunStatus.completed,
        stop_reason=event.stop_reason,
        metric_name=metric_name,
        metric=metric,
        val_loss=event.metrics.val_loss,
        majority_baseline=event.majority_baseline,
        curve=list(event.curve),
        steps=event.steps,
        planned_steps=event.planned_steps,
        hardware=event.hardware,
        seed=event.config.seed,
        profile_missing=profile is None,
    )


def failed_run(event: RunFailed, profile: StudyProfile | None) -> KbRun:
    fields = _end_fields(event, profile)
    return KbRun(
        **fields,
        config=event.config.model_dump(mode="json") if event.config else {},
        status=RunStatus.failed,
        stop_reason=f"{event.reason.value}: {event.message}"[:500],
        metric_name="accuracy" if fields["task"] != "causal_lm" else "neg_perplexity",
        seed=event.config.seed if event.config else None,
        profile_missing=profile is None and event.study_id is not None,
    )


def study_best(study_id: UUID, runs: Sequence[KbRun]) -> StudyBest | None:
    """The best finished (completed or early-stopped) trial of a study; None before any has a metric."""
    finished = [run for run in runs if run.status is not RunStatus.failed]
    scored = [(run.metric, run.run_id, run) for run in finished if run.metric is not None]
    if not scored:
        return None
    metric, _, best = max(scored, key=lambda entry: entry[:2])
    try:
        job_id = UUID(best.run_id)
    except ValueError:
        job_id = None
    return StudyBest(
        study_id=study_id,
        metric_name=best.metric_name,
        best=metric,
        job_id=job_id,
        completed=len(finished),
    )
