"""A run recorded for the realised-intensity tests: three metered hours at fra1, what the agent
charged, and what was observed later for two of them."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from metatune import contracts as c
from metatune import subjects
from metatune.registry import default_registry
from metatune_telemetry.ingest.adapters.writer import Incoming
from tests.support.builders import requested
from tests.support.samples import CONFIG, NOW, SPEC

H = timedelta(hours=1)
PUE = 1.2  # fra1's agent status
WH = (500.0, 250.0, 400.0)  # the run's IT energy in hours 0, 1, 2
FORECAST = (300.0, 100.0, 200.0)  # what the agent charged (the forecast in force)
REALISED = (250.0, 120.0)  # observed later for hours 0 and 1; hour 2 is not observed yet
MARGINAL = 900.0  # a marginal observation of hour 2: never a location-based price
REGISTRY = default_registry()


def recorded_run() -> tuple[list[tuple[str, c.Event]], c.RunCompleted, c.Assignment]:
    study, job = uuid4(), uuid4()
    spec = SPEC.model_copy(update={"webhook_url": None})
    hours = [
        c.HourlyEnergy(
            hour=NOW + i * H,
            datacenter="fra1",
            pue=PUE,
            energy_wh=wh,
            g_per_kwh=g,
            emissions_g=wh / 1000 * PUE * g,
        )
        for i, (wh, g) in enumerate(zip(WH, FORECAST, strict=True))
    ]
    start = c.Assignment(
        occurred_at=NOW,
        job_id=job,
        study_id=study,
        datacenter="fra1",
        action=c.AssignmentAction.start,
        plan_version=1,
        spec=spec,
        config=CONFIG,
    )
    done = c.RunCompleted(
        occurred_at=NOW + 3 * H,
        job_id=job,
        study_id=study,
        datacenter="fra1",
        config=CONFIG,
        metrics=c.RunMetrics(val_loss=0.3),
        steps=100,
        accounting=c.RunAccounting(energy_wh=sum(WH), wall_seconds=3 * 3600.0, hours=hours),
    )
    events: list[tuple[str, c.Event]] = [
        (
            subjects.DATASETS_SUBMITTED,
            c.DatasetSubmitted(occurred_at=NOW, study_id=study, spec=spec),
        ),
        (
            subjects.agent_status("fra1"),
            c.AgentStatus(
                occurred_at=NOW,
                datacenter="fra1",
                region="DE",
                gpus_total=8,
                gpus_free=7,
                gpu_model="H100",
                power_per_gpu_w=700.0,
                pue=PUE,
            ),
        ),
        (
            subjects.JOBS_REQUESTED,
            requested(job, study, spec=spec, estimated_gpu_hours=3.0),
        ),
        (subjects.assignments("fra1"), start),
    ]
    return events, done, start


def completed_subject() -> str:
    return subjects.runs_completed("fra1")


def incoming(events, first_seq=1) -> list[Incoming]:
    return [Incoming("METATUNE", first_seq + i, s, e.to_bytes()) for i, (s, e) in enumerate(events)]
