"""A plain bus client for the agent's tests: assignments and forecasts out, what the agents publish
recorded; the tiny training configuration and the dataset upload they share."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import nats

from metatune import subjects
from metatune.bus import DATASETS_BUCKET, ObjectStore
from metatune.clock import floor_hour
from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    CarbonForecast,
    DatasetLocation,
    ErrorEvent,
    LoraConfig,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
    StudySpec,
    TaskType,
)
from metatune_trainer_agent.settings import AgentSettings
from tests.support.waiting import wait_for

CONFIG = {"batch_size": 8, "max_seq_length": 32, "learning_rate": 3e-3, "max_steps": 8}
AGENT = {
    "agent_progress_interval_s": 0.0,
    "agent_status_interval_s": 0.5,
    "agent_idle_seconds": 0.05,
    "agent_checkpoint_every": 2,
}
DATASET_KEY = "studies/intents-slice.jsonl"


class Bus:
    """A plain client: publishes assignments and forecasts, records what the agents publish."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.events: list[Any] = []

    async def __aenter__(self) -> Bus:
        self.nc = await nats.connect(self.settings.nats_url)
        self.js = self.nc.jetstream()
        outcomes = {"completed": RunCompleted, "failed": RunFailed, "paused": RunPaused}

        async def record(msg) -> None:  # type: ignore[no-untyped-def]
            kind = msg.subject.rsplit(".", 1)[-1]
            if msg.subject.startswith("metatune.runs.") and kind in outcomes:  # any datacenter's
                self.events.append(outcomes[kind].model_validate_json(msg.data))
            elif msg.subject == subjects.errors("trainer-agent"):
                self.events.append(ErrorEvent.model_validate_json(msg.data))
            elif kind == "progress":
                self.events.append(RunProgress.model_validate_json(msg.data))
            elif kind == "status":
                self.events.append(AgentStatus.model_validate_json(msg.data))

        await self.nc.subscribe("metatune.>", cb=record)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def assign(self, assignment: Assignment | dict[str, Any]) -> None:
        if isinstance(assignment, Assignment):
            dc, payload = assignment.datacenter, assignment.to_bytes()
        else:
            dc, payload = assignment["datacenter"], as_json(assignment)
        await self.js.publish(subjects.assignments(dc), payload, stream=self.settings.stream_name)

    async def wait_for(
        self, kind: type, job_id: UUID | None = None, timeout_s: float = 120.0, **match: Any
    ) -> Any:
        """The first ``kind`` event (of ``job_id``, matching ``match``); fails at once when the
        job failed instead."""

        def found() -> Any:
            for event in self.events:
                if (
                    isinstance(event, kind)
                    and (job_id is None or getattr(event, "job_id", None) == job_id)
                    and all(getattr(event, k) == v for k, v in match.items())
                ):
                    return event
            failed = [e for e in self.events if isinstance(e, RunFailed) and e.job_id == job_id]
            if kind is not RunFailed and failed:
                raise AssertionError(
                    f"job {job_id} failed: {failed[0].reason}: {failed[0].message}"
                )
            return None

        try:
            return await wait_for(found, f"a {kind.__name__} for {job_id}", timeout=timeout_s)
        except AssertionError as exc:
            seen = [type(e).__name__ for e in self.events]
            raise AssertionError(f"{exc}; saw {seen}") from exc

    def of(self, kind: type, job_id: UUID) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind) and e.job_id == job_id]


def as_json(payload: dict[str, Any]) -> bytes:
    """A raw payload, as a client that skips our contracts would send it."""
    return json.dumps(payload, default=str).encode()


def spec(
    dataset: DatasetLocation,
    task: TaskType = TaskType.classification,
    base_model: str = "all-MiniLM-L6-v2",
) -> StudySpec:
    return StudySpec(
        dataset=dataset,
        task=task,
        base_model=base_model,
        deadline=datetime.now(UTC) + timedelta(days=1),
    )


def assignment(
    dc: str, action: AssignmentAction, job_id: UUID, study_spec: StudySpec | None, **extra: Any
) -> Assignment:
    return Assignment(
        occurred_at=datetime.now(UTC),
        job_id=job_id,
        study_id=UUID(int=1),
        datacenter=dc,
        action=action,
        plan_version=1,
        spec=study_spec,
        config=LoraConfig(**CONFIG) if study_spec else None,
        **extra,
    )


async def upload_dataset(settings: AgentSettings, path: Path) -> DatasetLocation:
    nc = await nats.connect(settings.nats_url)
    await ObjectStore(nc.jetstream()).put_file(DATASETS_BUCKET, DATASET_KEY, path)
    await nc.close()
    return DatasetLocation(kind="object", ref=DATASET_KEY)


async def publish_forecast(bus: Bus, region: str, g_per_kwh: float) -> None:
    start = floor_hour(datetime.now(UTC)) - timedelta(hours=1)
    values = [g_per_kwh] * 168
    forecast = CarbonForecast(
        occurred_at=datetime.now(UTC),
        region=region,
        issued_at=datetime.now(UTC),
        start=start,
        model_version="test",
        g_per_kwh=values,
        p10_g_per_kwh=values,
        p90_g_per_kwh=values,
    )
    await bus.js.publish(
        subjects.forecasts(region), forecast.to_bytes(), stream=bus.settings.stream_name
    )
