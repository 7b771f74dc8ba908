"""One study's events as real contract instances: the examples of the AsyncAPI document.

Built from the contracts (so an example that stops validating fails here first) with fixed ids and
times, so the generated document is the same on every run. Derived ``Nats-Msg-Id`` values come
from :mod:`metatune.msgids`, as on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

from metatune import contracts as c
from metatune import msgids
from metatune import subjects as s

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)
STUDY = UUID("6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b")
JOB = UUID("0b9e8d7c-6a5f-5e4d-8c3b-2a1f0e9d8c7b")
SUBMISSION = UUID("a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d")
START = UUID("5d4c3b2a-1f0e-5d9c-8b7a-6f5e4d3c2b1a")
AGENT_KEY = bytes(
    range(32)
)  # an agent's own secret key (metatune.msgids.sealed); a real one is random


def _id(n: int) -> UUID:
    return UUID(int=0x7E57_0000_0000_4000_8000_0000_0000_0000 + n)


@dataclass(frozen=True)
class Example:
    name: str
    summary: str
    subject: str
    event: c.Event
    msg_id: str | None = None  # None: the event's own id

    @property
    def headers(self) -> dict[str, str]:
        return {
            "Nats-Msg-Id": self.msg_id or str(self.event.event_id),
            "content-type": "application/json",
        }


SPEC = c.StudySpec(
    tags=("nlp", "intents"),
    dataset=c.DatasetLocation(
        kind="object",
        ref=f"studies/{STUDY}/snips_intents_2k.jsonl",
        format=c.DatasetFormat.jsonl,
        size_bytes=183_422,
        sha256="9f2b" * 16,
    ),
    task=c.TaskType.classification,
    base_model="all-MiniLM-L6-v2",
    text_column="text",
    label_column="intent",
    deadline=NOW + timedelta(hours=24),
    trials=3,
    region_group=c.RegionGroup.EU,
    home_datacenter="fra1",
    webhook_url="https://ci.example.org/hooks/metatune",
)
CONFIG = c.LoraConfig(
    rank=8, alpha=16, learning_rate=3e-4, batch_size=16, epochs=1, max_seq_length=64
)
HOURS = [NOW + timedelta(hours=h) for h in (2, 3)]
ACCOUNTING = c.RunAccounting(
    tokens_seen=412_000,
    tokens_with_padding=455_000,
    energy_wh=38.5,
    emissions_g=0.31,
    gpu_hours=0.0,
    wall_seconds=1_540.0,
    idle_power_w=21.0,
    power_source="rapl",
    hours=[
        c.HourlyEnergy(
            hour=h, datacenter="osl1", pue=1.1, energy_wh=19.25, g_per_kwh=14.6, emissions_g=0.155
        )
        for h in HOURS
    ],
)
FEATURES = c.MetaFeatures(
    n_examples=2000,
    n_classes=7,
    label_entropy_bits=2.80,
    label_entropy_norm=0.997,
    imbalance_ratio=1.1,
    words_mean=9.1,
    words_p50=9,
    words_p95=15,
    words_max=24,
    tokens_mean=12.4,
    tokens_p50=12,
    tokens_p95=20,
    tokens_max=35,
    padding_fraction_random=0.38,
    padding_fraction_grouped=0.06,
    ttr=0.17,
    mattr=0.82,
    mattr_window=50,
    hapax_ratio=0.52,
    zipf_alpha=1.87,
    zipf_alpha_se=0.03,
    zipf_xmin=2,
    vocab_size=3_100,
    unk_rate=0.0,
    fertility=1.31,
    duplicate_rate=0.004,
    script_mix={"latin": 1.0},
    sample_size=2000,
)
FORECAST = [120.0 - 40.0 * ((h % 24) in range(10, 16)) for h in range(c.HORIZON_HOURS)]


# long: one example per contract, a table read as data
def examples() -> list[Example]:
    """One example per contract, in the order a study's events happen."""
    return [
        Example(
            "submission",
            "A classification study on a dataset uploaded to the datasets bucket",
            s.DATASETS_SUBMITTED,
            c.DatasetSubmitted(event_id=SUBMISSION, occurred_at=NOW, study_id=STUDY, spec=SPEC),
        ),
        Example(
            "profile",
            "The profile of that dataset",
            s.DATASETS_PROFILED,
            c.DatasetProfiled(
                event_id=_id(1),
                occurred_at=NOW + timedelta(seconds=40),
                study_id=STUDY,
                spec=SPEC,
                features=FEATURES,
                rows_skipped=1,
                skip_reasons={"empty_text": 1},
            ),
            msgids.profiled(SUBMISSION),
        ),
        Example(
            "first-trial",
            "The first of three cold-start trials",
            s.JOBS_REQUESTED,
            c.JobRequested(
                event_id=_id(2),
                occurred_at=NOW + timedelta(minutes=1),
                job_id=JOB,
                study_id=STUDY,
                trial_index=0,
                spec=SPEC,
                config=CONFIG,
                predicted_metric=0.9,
                predicted_metric_std=0.04,
                metric_name="accuracy",
                prediction_source=c.PredictionSource.cold_start,
                acquisition="top-k",
                estimated_gpu_hours=0.5,
                power_kw=0.35,
                deadline=SPEC.deadline,
            ),
        ),
        Example(
            "too-late",
            "A job no datacenter can finish by its deadline",
            s.JOBS_INFEASIBLE,
            c.JobInfeasible(
                event_id=_id(3),
                occurred_at=NOW + timedelta(minutes=1),
                job_id=JOB,
                study_id=STUDY,
                reason="needs 30 h of GPU time before a deadline 24 h away",
                earliest_finish=NOW + timedelta(hours=31),
                situation=c.InfeasibleSituation.late,
                deadline=NOW + timedelta(hours=24),
                policy=c.InfeasibleAction.run_late,
                options=[
                    c.InfeasibleOption(
                        action=c.InfeasibleAction.run_late,
                        earliest_finish=NOW + timedelta(hours=31),
                        how="nothing to do: it stays planned and finishes after its deadline (the default)",
                    ),
                    c.InfeasibleOption(
                        action=c.InfeasibleAction.drop,
                        how=f"publish a JobCancelled on metatune.jobs.cancelled (metatune cancel {JOB})",
                    ),
                    c.InfeasibleOption(
                        action=c.InfeasibleAction.relax_residency,
                        earliest_finish=NOW + timedelta(hours=26),
                        how="cancel it and submit the study again with a wider region_group (or none)",
                    ),
                ],
            ),
        ),
        Example(
            "cancel",
            "A user withdraws the job",
            s.JOBS_CANCELLED,
            c.JobCancelled(
                event_id=_id(4),
                occurred_at=NOW + timedelta(hours=1),
                job_id=JOB,
                study_id=STUDY,
                reason="wrong label column",
            ),
        ),
        Example(
            "cancel-study",
            "A user withdraws the whole study",
            s.STUDIES_CANCELLED,
            c.StudyCancelled(
                event_id=_id(5),
                occurred_at=NOW + timedelta(hours=2),
                study_id=STUDY,
                reason="wrong label column",
            ),
        ),
        Example(
            "budget-spent",
            "The study's three trials are done",
            s.STUDIES_STOPPED,
            c.StudyStopped(
                event_id=_id(6),
                occurred_at=NOW + timedelta(hours=9),
                study_id=STUDY,
                reason=c.StopReason.budget,
                trials_requested=3,
                trials_finished=3,
                best_metric=0.93,
                metric_name="accuracy",
            ),
        ),
        Example(
            "norway",
            "Norway's forecast for the next week",
            s.forecasts("NO"),
            c.CarbonForecast(
                event_id=_id(7),
                occurred_at=NOW,
                region="NO",
                issued_at=NOW,
                start=NOW,
                model_version="gbm-2023.1",
                g_per_kwh=FORECAST,
                p10_g_per_kwh=[v * 0.8 for v in FORECAST],
                p90_g_per_kwh=[v * 1.3 for v in FORECAST],
            ),
            msgids.forecast("NO", NOW),
        ),
        Example(
            "start-in-oslo",
            "Start the job in osl1 in its greenest hours",
            s.assignments("osl1"),
            c.Assignment(
                event_id=START,
                occurred_at=NOW + timedelta(minutes=2),
                job_id=JOB,
                study_id=STUDY,
                datacenter="osl1",
                action=c.AssignmentAction.start,
                plan_version=4,
                spec=SPEC,
                config=CONFIG,
                hours_planned=2,
                estimated_gpu_hours=0.5,
            ),
        ),
        Example(
            "plan",
            "The plan after the study's first trial arrived",
            s.PLANS,
            c.Plan(
                event_id=_id(8),
                occurred_at=NOW + timedelta(minutes=2),
                plan_version=4,
                horizon_start=NOW,
                entries=[c.PlanEntry(job_id=JOB, datacenter="osl1", hours=HOURS, emissions_g=0.31)],
                expected_emissions_g=0.31,
                baseline_emissions_g=13.2,
                solve_seconds=0.42,
                mip_gap=0.0,
            ),
        ),
        Example(
            "heartbeat",
            "osl1 with one GPU busy",
            s.agent_status("osl1"),
            c.AgentStatus(
                event_id=_id(9),
                occurred_at=NOW + timedelta(hours=2),
                datacenter="osl1",
                region="NO",
                gpus_total=16,
                gpus_free=15,
                gpu_model="H100-80GB",
                power_per_gpu_w=700,
                pue=1.1,
                running_jobs=[JOB],
            ),
        ),
        Example(
            "halfway",
            "Half of the epoch done, with the two steps since the previous progress event",
            s.run_progress("osl1", JOB),
            c.RunProgress(
                event_id=_id(10),
                occurred_at=NOW + timedelta(hours=2, minutes=30),
                job_id=JOB,
                datacenter="osl1",
                step=56,
                total_steps=113,
                train_loss=0.91,
                learning_rate=1.6e-4,
                power_w=25.0,
                step_time_s=13.6,
                estimated_remaining_gpu_hours=0.21,
                accounting=ACCOUNTING,
                session_started_at=NOW + timedelta(hours=2, minutes=4),
                session_start_step=40,
                startup_s=31.0,
                startup_wall_s=31.0,
                steps_per_hour=265.0,
                tokens_per_second=410.0,
                checkpoint_step=50,
                points=[
                    c.MetricPoint(
                        step=step,
                        occurred_at=NOW
                        + timedelta(hours=2, minutes=30, seconds=-13.6 * (56 - step)),
                        train_loss=loss,
                        learning_rate=1.6e-4,
                        tokens_seen=412_000 - 7_350 * (56 - step),
                        tokens_with_padding=455_000 - 8_100 * (56 - step),
                        step_time_s=13.6,
                    )
                    for step, loss in ((54, 0.95), (55, 0.93))
                ],
            ),
        ),
        Example(
            "done",
            "The trained adapter, its metrics and its emissions",
            s.runs_completed("osl1"),
            c.RunCompleted(
                event_id=_id(11),
                occurred_at=NOW + timedelta(hours=4),
                job_id=JOB,
                study_id=STUDY,
                datacenter="osl1",
                config=CONFIG,
                metrics=c.RunMetrics(val_loss=0.42, accuracy=0.93, macro_f1=0.92),
                steps=113,
                adapter_key=f"{JOB}.tar",
                accounting=ACCOUNTING,
                base_model=SPEC.base_model,
                task=SPEC.task,
                planned_steps=113,
                majority_baseline=0.15,
                curve=[
                    c.CurvePoint(step=0, fraction=0.0, val_loss=1.95, metric=0.14),
                    c.CurvePoint(
                        step=113, fraction=1.0, val_loss=0.42, metric=0.93, train_loss=0.5
                    ),
                ],
                hardware=c.Hardware(device="cpu", cpu_model="AMD EPYC 9454", precision="fp32"),
            ),
            msgids.completed(AGENT_KEY, JOB, "osl1"),
        ),
        Example(
            "stopped",
            "A stop assignment ended the run",
            s.runs_failed("osl1"),
            c.RunFailed(
                event_id=_id(12),
                occurred_at=NOW + timedelta(hours=1),
                job_id=JOB,
                study_id=STUDY,
                datacenter="osl1",
                reason=c.FailureReason.stopped,
                message="stopped by the scheduler at step 12",
                config=CONFIG,
                base_model=SPEC.base_model,
                task=SPEC.task,
            ),
            msgids.failed(AGENT_KEY, START),
        ),
        Example(
            "paused",
            "Paused at a checkpoint for a greener hour",
            s.runs_paused("osl1"),
            c.RunPaused(
                event_id=_id(13),
                occurred_at=NOW + timedelta(hours=3),
                job_id=JOB,
                study_id=STUDY,
                datacenter="osl1",
                step=80,
                checkpoint_key=str(JOB),
                accounting=ACCOUNTING,
            ),
            msgids.paused(AGENT_KEY, START),
        ),
        Example(
            "bad-row",
            "The profiler could not read a dataset",
            s.errors("profiler"),
            c.ErrorEvent(
                event_id=_id(14),
                occurred_at=NOW + timedelta(seconds=5),
                service="profiler",
                kind=c.ErrorKind.bad_input,
                code="not_utf8",
                message="row 3 is not UTF-8",
                subject=s.DATASETS_SUBMITTED,
                row=3,
                correlation_id=str(STUDY),
            ),
        ),
        Example(
            "hour",
            "10:00 on the simulated clock",
            s.CLOCK_TICK,
            c.ClockTick(
                event_id=_id(15),
                occurred_at=NOW + timedelta(hours=1),
                hour=NOW + timedelta(hours=1),
                simulated=True,
            ),
            msgids.tick(NOW + timedelta(hours=1)),
        ),
    ]
