"""A recorded study as the event log holds it (two trials: one trained at osl1, one failed at fra1),
and the helpers the CLI's tests share: publish events, count what is stored, wait for a
submission, read the log back, check a one-line error."""

from __future__ import annotations

import json
from datetime import timedelta
from uuid import UUID, uuid4

import nats
from nats.js import JetStreamContext

from metatune import contracts as c
from metatune import subjects
from metatune.bus import DATASETS_BUCKET, ensure_streams, headers_for
from metatune.settings import Settings
from metatune_cli.asyncapi.examples import ACCOUNTING, CONFIG, FEATURES, NOW, SPEC
from tests.support.waiting import wait_for

STUDY, TRAINED, FAILED = uuid4(), uuid4(), uuid4()


def study_events(study: UUID = STUDY) -> list[tuple[str, c.Event]]:
    def requested(job: UUID, index: int) -> c.JobRequested:
        return c.JobRequested(
            occurred_at=NOW,
            job_id=job,
            study_id=study,
            trial_index=index,
            spec=SPEC,
            config=CONFIG,
            predicted_metric=0.9 - index / 10,
            predicted_metric_std=0.05,
            metric_name="accuracy",
            estimated_gpu_hours=0.5,
            power_kw=0.3,
            deadline=SPEC.deadline,
        )

    def started(job: UUID, datacenter: str) -> tuple[str, c.Assignment]:
        """Its run events count only from there (metatune.provenance)."""
        return subjects.assignments(datacenter), c.Assignment(
            occurred_at=NOW,
            job_id=job,
            study_id=study,
            datacenter=datacenter,
            action=c.AssignmentAction.start,
            plan_version=1,
        )

    return [
        (
            subjects.DATASETS_SUBMITTED,
            c.DatasetSubmitted(occurred_at=NOW, study_id=study, spec=SPEC),
        ),
        (subjects.JOBS_REQUESTED, requested(TRAINED, 0)),
        (subjects.JOBS_REQUESTED, requested(FAILED, 1)),
        started(TRAINED, "osl1"),
        started(FAILED, "fra1"),
        (
            subjects.runs_completed("osl1"),
            c.RunCompleted(
                occurred_at=NOW + timedelta(hours=2),
                job_id=TRAINED,
                study_id=study,
                datacenter="osl1",
                config=CONFIG,
                metrics=c.RunMetrics(val_loss=0.4, accuracy=0.91),
                steps=113,
                early_stopped=True,  # every view says so, not "completed"
                stop_reason="plateau",
                majority_baseline=0.6,
                adapter_key=f"{TRAINED}.tar",
                accounting=ACCOUNTING,
                base_model=SPEC.base_model,
                task=SPEC.task,
                hardware=c.Hardware(device="cpu", cpu_model="Test CPU 9000", precision="fp32"),
            ),
        ),
        (
            subjects.runs_failed("fra1"),
            c.RunFailed(
                occurred_at=NOW + timedelta(hours=1),
                job_id=FAILED,
                study_id=study,
                datacenter="fra1",
                reason=c.FailureReason.out_of_memory,
                message="OOM at batch 16",
            ),
        ),
        (subjects.forecasts("NO"), observed_forecast()),
        (
            subjects.STUDIES_STOPPED,
            c.StudyStopped(
                occurred_at=NOW + timedelta(hours=3),
                study_id=study,
                reason=c.StopReason.budget,
                trials_requested=2,
                trials_finished=2,
            ),
        ),
    ]


def profiled(study: UUID = STUDY) -> tuple[str, c.Event]:
    """The study's profile: four classes, so chance is 0.25."""
    features = FEATURES.model_copy(update={"n_classes": 4})
    return subjects.DATASETS_PROFILED, c.DatasetProfiled(
        occurred_at=NOW, study_id=study, spec=SPEC, features=features
    )


OBSERVED_G = 20.0  # osl1's grid (NO) observed in the run's first hour; its second is not yet


def observed_forecast() -> c.CarbonForecast:
    """A forecast issued after the run's first hour, carrying that hour as observed."""
    issued = ACCOUNTING.hours[1].hour
    return c.CarbonForecast(
        occurred_at=issued,
        region="NO",
        issued_at=issued,
        start=issued,
        model_version="test",
        g_per_kwh=[15.0] * 168,
        p10_g_per_kwh=[10.0] * 168,
        p90_g_per_kwh=[20.0] * 168,
        observed=c.ObservedIntensity(
            source="replay",
            hours=[c.ObservedHour(hour=ACCOUNTING.hours[0].hour, g_per_kwh=OBSERVED_G)],
        ),
    )


async def publish(url: str, events: list[tuple[str, c.Event]]) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await ensure_streams(js, Settings(nats_url=url))
    for subject, event in events:
        await js.publish(subject, event.to_bytes(), headers=headers_for(event))
    await nc.close()


async def stored(js: JetStreamContext) -> tuple[int, int]:
    """Messages in the event log and in the datasets bucket."""
    events = (await js.stream_info("METATUNE")).state.messages
    return events, (await js.stream_info(f"OBJ_{DATASETS_BUCKET}")).state.messages


async def submission(js: JetStreamContext, what: str) -> dict:
    """Wait (two minutes at most) until something is published (``what``: the submission), then
    the payload of the last ``datasets.submitted`` event."""

    async def published() -> bool:
        return (await js.stream_info("METATUNE")).state.messages > 0

    await wait_for(published, what, timeout=120)
    return json.loads((await js.get_last_msg("METATUNE", subjects.DATASETS_SUBMITTED)).data)


async def logged(url: str, subject: str) -> list[dict]:
    """The payloads the event log holds on ``subject``, oldest first."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    count = sum(
        ((await js.stream_info("METATUNE", subjects_filter=subject)).state.subjects or {}).values()
    )
    sub = await js.subscribe(subject, stream="METATUNE", ordered_consumer=True)
    payloads = [json.loads((await sub.next_msg(timeout=10)).data) for _ in range(count)]
    await nc.close()
    return payloads


def one_error_line(result, code: int, *words: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(w in lines[0] for w in words), lines[0]
