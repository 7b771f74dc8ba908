"""A recorded study for the dashboard tests: two trials, forecasts, a plan, an assignment, runs.

Trial 0 (home fra1, grid DE) is requested at NOW for 2 h on 2 GPUs at 0.7 kW, planned and run at
osl1 (grid NO) two hours later; trial 1 was predicted by loss only. The dataset has four classes
(chance 0.25). The figures the views must
show are computed here by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from metatune import contracts as c
from metatune import subjects
from metatune.dashboard_tokens import TOKEN_FILE, write_tokens
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from metatune_telemetry.settings import TelemetrySettings
from tests.support.builders import finished, profiled, requested, submitted
from tests.support.samples import FEATURES, NOW, SPEC, started

H = timedelta(hours=1)
DE = [
    300.0 + i for i in range(168)
]  # median; p10 / p90 are -10 / +10: the expected intensity is the median
NO = [20.0 + i for i in range(168)]
RUN_PUE = 1.1
RUN_WH = (700.0, 700.0)

# by hand: run now at fra1 = NOW and NOW+1h at 0.7 kW x PUE 1.25 (agent status) x 300 / 301 g/kWh
BASELINE_KG = 0.7 * 1.25 * (300.0 + 301.0) / 1000
# ran at osl1 NOW+2h, NOW+3h: 0.7 kWh x 1.1 x 22 / 23 g
ACTUAL_KG = sum(wh / 1000 * RUN_PUE * g for wh, g in zip(RUN_WH, (22.0, 23.0), strict=True)) / 1000
PLANNED_KG = 0.035
CLASSES = 4


@dataclass(frozen=True)
class Scenario:
    study: UUID
    job: UUID
    job2: UUID


def _forecast(region: str, median: list[float]) -> tuple[str, c.CarbonForecast]:
    return subjects.forecasts(region), c.CarbonForecast(
        occurred_at=NOW,
        region=region,
        issued_at=NOW,
        start=NOW,
        model_version="test",
        g_per_kwh=median,
        p10_g_per_kwh=[v - 10 for v in median],
        p90_g_per_kwh=[v + 10 for v in median],
    )


async def record_dashboard(db) -> Scenario:
    study, job, job2 = uuid4(), uuid4(), uuid4()
    spec = SPEC.model_copy(update={"webhook_url": None, "name": "intents-en"})
    hours = [
        c.HourlyEnergy(
            hour=NOW + (2 + i) * H,
            datacenter="osl1",
            pue=RUN_PUE,
            energy_wh=wh,
            g_per_kwh=g,
            emissions_g=wh / 1000 * RUN_PUE * g,
        )
        for i, (wh, g) in enumerate(zip(RUN_WH, (22.0, 23.0), strict=True))
    ]
    events = [
        (subjects.DATASETS_SUBMITTED, submitted(study, spec)),
        (
            subjects.DATASETS_PROFILED,
            profiled(study, spec, FEATURES.model_copy(update={"n_classes": CLASSES})),
        ),
        (
            subjects.agent_status("fra1"),
            c.AgentStatus(
                occurred_at=NOW,
                datacenter="fra1",
                region="DE",
                gpus_total=8,
                gpus_free=8,
                gpu_model="H100",
                power_per_gpu_w=700.0,
                pue=1.25,
            ),
        ),
        _forecast("DE", DE),
        _forecast("NO", NO),
        (
            subjects.JOBS_REQUESTED,
            requested(
                job,
                study,
                spec=spec,
                predicted_metric=0.85,
                predicted_metric_std=0.05,
                metric_name="accuracy",
                gpus=2,
                estimated_gpu_hours=4.0,
                power_kw=0.7,
            ),
        ),
        (
            subjects.JOBS_REQUESTED,
            requested(
                job2,
                study,
                spec=spec,
                trial_index=1,
                predicted_loss=0.4,
                predicted_loss_std=0.1,
                gpus=1,
                power_kw=0.3,
            ),
        ),
        (
            subjects.PLANS,
            c.Plan(
                occurred_at=NOW,
                plan_version=3,
                horizon_start=NOW,
                expected_emissions_g=35.0,
                baseline_emissions_g=600.0,
                solve_seconds=0.1,
                entries=[
                    c.PlanEntry(
                        job_id=job,
                        datacenter="osl1",
                        hours=[NOW + 2 * H, NOW + 3 * H],
                        emissions_g=PLANNED_KG * 1000,
                    )
                ],
            ),
        ),
        started(
            job, "osl1", study, NOW + 2 * H, plan_version=3, spec=spec, gpus=2, hours_planned=2
        ),
        finished(
            job,
            study,
            "osl1",
            NOW + 4 * H,
            steps=100,
            metrics=c.RunMetrics(val_loss=0.3, accuracy=0.8),
            majority_baseline=0.85,  # this trial does not beat always saying the commonest label
            accounting=c.RunAccounting(energy_wh=sum(RUN_WH), wall_seconds=7200.0, hours=hours),
        ),
        started(job2, "fra1", study),
        finished(
            job2,
            study,
            "fra1",
            NOW + H,
            steps=10,
            early_stopped=True,
            stop_reason="plateau",
            metrics=c.RunMetrics(val_loss=0.45),
            accounting=c.RunAccounting(energy_wh=10.0, wall_seconds=600.0),
        ),
    ]
    await EventWriter(db).write(
        [Incoming("METATUNE", i + 1, s, e.to_bytes()) for i, (s, e) in enumerate(events)]
    )
    return Scenario(study, job, job2)


def guarded_app(db, tokens_dir: Path) -> tuple[Any, str]:
    """Telemetry's read API over ``db`` with a dashboard token written (at NOW) in ``tokens_dir``:
    the app and the token."""
    write_tokens(tokens_dir, NOW)
    app = create_app(db, TelemetrySettings(dashboard_tokens_dir=tokens_dir))
    return app, (tokens_dir / TOKEN_FILE).read_text().strip()
