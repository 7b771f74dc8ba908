"""Builders of the requests several test folders send: a registry of a few datacenters, a tiny
training job (the embedded MiniLM, a handful of steps) as the bus and as the trainer see it, and
a study's submission, profile, trial requests and finished runs over the samples (``SPEC``,
``CONFIG``, ``NOW``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from metatune import subjects
from metatune.contracts import (
    AgentStatus,
    DatasetLocation,
    DatasetProfiled,
    DatasetSubmitted,
    JobRequested,
    LoraConfig,
    MetaFeatures,
    RegionGroup,
    RunCompleted,
    StudySpec,
    TaskType,
)
from metatune.registry import Datacenter, Registry, default_registry
from metatune_trainer_agent.domain.request import TrainingRequest, TrainOptions
from metatune_trainer_agent.domain.run import Site

from .samples import CONFIG, FEATURES, NOW, SPEC

TINY_TRAINING: dict[str, Any] = {"batch_size": 8, "max_seq_length": 32, "learning_rate": 3e-3}
FAST_SITE = Site(idle_seconds=0.05)


def small_registry(*names: str) -> Registry:
    """The default registry cut down to the datacenters ``names``."""
    return Registry(datacenters=[default_registry().get(name) for name in names])


def heartbeat(dc: Datacenter, gpus: int | None = None, at: datetime | None = None) -> AgentStatus:
    """What the agent of ``dc`` reports: ``gpus`` GPUs (the registry's figure by default), all
    free; for tests of the scheduler without agents of their own."""
    return dc.idle_status(at or datetime.now(UTC), gpus)


def job_request(
    dataset: DatasetLocation, *, max_steps: int, now: datetime | None = None, **extra: Any
) -> JobRequested:
    """A classification trial of MiniLM on ``dataset``, home fra1, due in a day."""
    now = now or datetime.now(UTC)
    spec = StudySpec(
        dataset=dataset,
        task=TaskType.classification,
        base_model="all-MiniLM-L6-v2",
        deadline=now + timedelta(days=1),
        region_group=RegionGroup.EU,
        home_datacenter="fra1",
    )
    return JobRequested(
        occurred_at=now,
        job_id=uuid4(),
        study_id=uuid4(),
        trial_index=0,
        spec=spec,
        config=LoraConfig(**TINY_TRAINING, max_steps=max_steps),
        gpus=1,
        estimated_gpu_hours=1.0,
        power_kw=0.3,
        deadline=now + timedelta(days=1),
        **extra,
    )


def submitted(study: UUID, spec: StudySpec = SPEC, at: datetime = NOW) -> DatasetSubmitted:
    """The submission of ``study`` (the sample spec unless ``spec`` says)."""
    return DatasetSubmitted(occurred_at=at, study_id=study, spec=spec)


def profiled(
    study: UUID, spec: StudySpec = SPEC, features: MetaFeatures = FEATURES, at: datetime = NOW
) -> DatasetProfiled:
    """The profile of ``study``'s dataset (the sample spec and features unless given)."""
    return DatasetProfiled(occurred_at=at, study_id=study, spec=spec, features=features)


def requested(
    job: UUID, study: UUID, *, spec: StudySpec = SPEC, trial_index: int = 0, **fields: Any
) -> JobRequested:
    """Trial ``trial_index`` of ``study`` as the recommender requests it: the sample config, one
    GPU-hour at 0.5 kW, due at the study's deadline, at ``NOW``; ``fields`` set any of these or
    more (``predicted_metric``, ``gpus``...)."""
    values: dict[str, Any] = {
        "occurred_at": NOW,
        "config": CONFIG,
        "estimated_gpu_hours": 1.0,
        "power_kw": 0.5,
        "deadline": spec.deadline,
    }
    return JobRequested(
        job_id=job, study_id=study, trial_index=trial_index, spec=spec, **(values | fields)
    )


def finished(
    job: UUID, study: UUID, datacenter: str = "fra1", at: datetime = NOW, **fields: Any
) -> tuple[str, RunCompleted]:
    """``job``'s run completed at ``datacenter`` (the sample config unless ``fields`` say), on
    the subject its agent reports it on; ``fields`` give the rest (steps, metrics, accounting...)."""
    values: dict[str, Any] = {"config": CONFIG} | fields
    event = RunCompleted(
        occurred_at=at, job_id=job, study_id=study, datacenter=datacenter, **values
    )
    return subjects.runs_completed(datacenter), event


def request_for(
    dataset: Path,
    task: TaskType = TaskType.classification,
    *,
    cache: Path | None = None,
    **config: object,
) -> TrainingRequest:
    """What the trainer runs for a tiny job on ``dataset`` (4 steps unless ``config`` says)."""
    values: dict[str, object] = {**TINY_TRAINING, "max_steps": 4}
    values.update(config)
    return TrainingRequest(
        dataset=dataset,
        task=task,
        base_model="all-MiniLM-L6-v2",
        config=LoraConfig.model_validate(values),
        options=TrainOptions(cache_dir=cache, eval_every=5),
    )
