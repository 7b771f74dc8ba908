"""One valid instance of every contract, for round-trip tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from metatune import contracts as c
from metatune import subjects

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
STUDY = uuid4()
JOB = uuid4()
SPEC = c.StudySpec(
    dataset=c.DatasetLocation(
        kind="object", ref=f"studies/{STUDY}/sst2.jsonl", format=c.DatasetFormat.jsonl
    ),
    task=c.TaskType.classification,
    base_model="all-MiniLM-L6-v2",
    label_column="label",
    deadline=NOW + timedelta(hours=24),
    region_group=c.RegionGroup.EU,
    home_datacenter="fra1",
    webhook_url="https://example.org/hook",
)
FEATURES = c.MetaFeatures(
    n_examples=100,
    n_classes=2,
    label_entropy_bits=1.0,
    label_entropy_norm=1.0,
    imbalance_ratio=1.0,
    words_mean=10,
    words_p50=9,
    words_p95=20,
    words_max=30,
    tokens_mean=14,
    tokens_p50=12,
    tokens_p95=28,
    tokens_max=40,
    padding_fraction_random=0.4,
    padding_fraction_grouped=0.1,
    ttr=0.5,
    mattr=0.8,
    mattr_window=50,
    hapax_ratio=0.5,
    zipf_alpha=1.9,
    zipf_alpha_se=0.02,
    zipf_xmin=1,
    vocab_size=500,
    unk_rate=0.0,
    fertility=1.3,
    duplicate_rate=0.01,
    script_mix={"latin": 1.0},
    sample_size=100,
)
CONFIG = c.LoraConfig(rank=8, learning_rate=3e-4)
ACCOUNTING = c.RunAccounting(
    tokens_seen=1000, tokens_with_padding=1200, energy_wh=1.5, emissions_g=0.4
)
FORECAST = [300.0 + i for i in range(168)]


def samples() -> list[tuple[str, c.Event]]:
    """(subject, event) for every contract."""
    return [
        (
            subjects.DATASETS_SUBMITTED,
            c.DatasetSubmitted(occurred_at=NOW, study_id=STUDY, spec=SPEC),
        ),
        (
            subjects.DATASETS_PROFILED,
            c.DatasetProfiled(
                occurred_at=NOW,
                study_id=STUDY,
                spec=SPEC,
                features=FEATURES,
                rows_skipped=2,
                skip_reasons={"too_long": 2},
            ),
        ),
        (
            subjects.JOBS_REQUESTED,
            c.JobRequested(
                occurred_at=NOW,
                job_id=JOB,
                study_id=STUDY,
                trial_index=0,
                spec=SPEC,
                config=CONFIG,
                predicted_loss=0.4,
                predicted_loss_std=0.1,
                estimated_gpu_hours=2.0,
                power_kw=0.7,
                deadline=SPEC.deadline,
            ),
        ),
        (
            subjects.JOBS_CANCELLED,
            c.JobCancelled(occurred_at=NOW, job_id=JOB, study_id=STUDY, reason="budget cut"),
        ),
        (
            subjects.STUDIES_CANCELLED,
            c.StudyCancelled(occurred_at=NOW, study_id=STUDY, reason="no longer needed"),
        ),
        (
            subjects.STUDIES_STOPPED,
            c.StudyStopped(
                occurred_at=NOW,
                study_id=STUDY,
                reason=c.StopReason.budget,
                trials_requested=3,
                trials_finished=3,
                best_metric=0.9,
            ),
        ),
        (
            subjects.JOBS_INFEASIBLE,
            c.JobInfeasible(
                occurred_at=NOW,
                job_id=JOB,
                reason="deadline",
                earliest_finish=NOW + timedelta(hours=30),
            ),
        ),
        (
            subjects.forecasts("DE"),
            c.CarbonForecast(
                occurred_at=NOW,
                region="DE",
                issued_at=NOW,
                start=NOW,
                model_version="test",
                g_per_kwh=FORECAST,
                p10_g_per_kwh=[v - 50 for v in FORECAST],
                p90_g_per_kwh=[v + 50 for v in FORECAST],
            ),
        ),
        (
            subjects.assignments("fra1"),
            c.Assignment(
                occurred_at=NOW,
                job_id=JOB,
                study_id=STUDY,
                datacenter="fra1",
                action=c.AssignmentAction.start,
                plan_version=3,
                spec=SPEC,
                config=CONFIG,
                hours_planned=2,
            ),
        ),
        (
            subjects.PLANS,
            c.Plan(
                occurred_at=NOW,
                plan_version=3,
                horizon_start=NOW,
                entries=[
                    c.PlanEntry(job_id=JOB, datacenter="fra1", hours=[NOW], emissions_g=210.0)
                ],
                expected_emissions_g=210.0,
                baseline_emissions_g=400.0,
                solve_seconds=0.1,
            ),
        ),
        (
            subjects.agent_status("fra1"),
            c.AgentStatus(
                occurred_at=NOW,
                datacenter="fra1",
                region="DE",
                gpus_total=16,
                gpus_free=15,
                gpu_model="H100",
                power_per_gpu_w=700,
                pue=1.25,
                running_jobs=[JOB],
            ),
        ),
        (
            subjects.run_progress("fra1", JOB),
            c.RunProgress(
                occurred_at=NOW,
                job_id=JOB,
                datacenter="fra1",
                step=10,
                total_steps=100,
                train_loss=0.7,
                accounting=ACCOUNTING,
            ),
        ),
        (
            subjects.runs_completed("fra1"),
            c.RunCompleted(
                occurred_at=NOW,
                job_id=JOB,
                study_id=STUDY,
                datacenter="fra1",
                config=CONFIG,
                metrics=c.RunMetrics(val_loss=0.3, accuracy=0.9),
                steps=100,
                accounting=ACCOUNTING,
            ),
        ),
        (
            subjects.runs_failed("fra1"),
            c.RunFailed(
                occurred_at=NOW,
                job_id=JOB,
                datacenter="fra1",
                reason=c.FailureReason.invalid_config,
                message="rank 0",
            ),
        ),
        (
            subjects.runs_paused("fra1"),
            c.RunPaused(
                occurred_at=NOW,
                job_id=JOB,
                study_id=STUDY,
                datacenter="fra1",
                step=10,
                checkpoint_key=f"jobs/{JOB}/step-10",
            ),
        ),
        (
            subjects.errors("profiler"),
            c.ErrorEvent(
                occurred_at=NOW,
                service="profiler",
                kind=c.ErrorKind.bad_input,
                code="not_utf8",
                message="row 3 is not UTF-8",
                row=3,
            ),
        ),
        (subjects.CLOCK_TICK, c.ClockTick(occurred_at=NOW, hour=NOW, simulated=True)),
    ]


def agent_status(
    datacenter: str, device: str | None, gpus: int, at: datetime = NOW
) -> c.AgentStatus:
    """A status of ``datacenter``'s agent offering ``gpus`` free GPUs on ``device``."""
    return c.AgentStatus(
        occurred_at=at,
        datacenter=datacenter,
        region="DE",
        gpus_total=gpus,
        gpus_free=gpus,
        gpu_model="H100",
        device=device,
        power_per_gpu_w=700,
        pue=1.2,
    )


def started(
    job_id: UUID,
    datacenter: str = "fra1",
    study_id: UUID | None = None,
    at: datetime = NOW,
    **fields: Any,
) -> tuple[str, c.Assignment]:
    """A start assignment of ``job_id`` at ``datacenter``: run events count only from there;
    plan 1, the sample spec and config, one hour, unless ``fields`` say (``gpus``, ``spec``...)."""
    values: dict[str, Any] = {"plan_version": 1, "spec": SPEC, "config": CONFIG, "hours_planned": 1}
    return (
        subjects.assignments(datacenter),
        c.Assignment(
            occurred_at=at,
            job_id=job_id,
            study_id=study_id or STUDY,
            datacenter=datacenter,
            action=c.AssignmentAction.start,
            **(values | fields),
        ),
    )


async def record_assignment(js, job_id: UUID, datacenter: str = "fra1") -> None:
    """The scheduler's KV record of ``job_id`` started at ``datacenter``, as consumers without an
    assignment state of their own (the recommender) read it."""
    from metatune.bus import ASSIGNMENTS_BUCKET

    _, assignment = started(job_id, datacenter)
    kv = await js.key_value(ASSIGNMENTS_BUCKET)
    await kv.put(str(job_id), c.CurrentAssignment.of(assignment).model_dump_json().encode())
