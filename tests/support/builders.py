"""Builders of the requests several test folders send: a registry of a few datacenters, a tiny
training job (the embedded MiniLM, a handful of steps) as the bus and as the trainer see it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

from metatune.contracts import (
    AgentStatus,
    DatasetLocation,
    JobRequested,
    LoraConfig,
    RegionGroup,
    StudySpec,
    TaskType,
)
from metatune.registry import Datacenter, Registry, default_registry
from metatune_trainer_agent.domain.request import TrainingRequest, TrainOptions
from metatune_trainer_agent.domain.run import Site

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
