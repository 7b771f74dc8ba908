"""What several telemetry tests record and wait for: events as the writer takes them, the
samples without a webhook, the wait until the database holds both streams, an outbox row,
progress events carrying points, a migration rolled back."""

from __future__ import annotations

from datetime import timedelta
from importlib import resources
from uuid import UUID, uuid4

import psycopg
from yoyo import get_backend, read_migrations

from metatune import contracts as c
from metatune import subjects
from metatune.postgres import yoyo_uri
from metatune.settings import Settings
from metatune_telemetry.adapters.db import Database
from metatune_telemetry.ingest.adapters.verify import verify
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.builders import requested, submitted
from tests.support.samples import CONFIG, NOW, SPEC, samples, started
from tests.support.waiting import wait_for


def incoming(events, first=1):
    return [Incoming("METATUNE", first + i, s, e.to_bytes()) for i, (s, e) in enumerate(events)]


def without_webhook(event):
    spec = getattr(event, "spec", None)
    return (
        event.model_copy(update={"spec": spec.model_copy(update={"webhook_url": None})})
        if spec
        else event
    )


def samples_without_webhook() -> list[tuple[str, c.Event]]:
    """Every contract's sample (:func:`tests.support.samples.samples`), its spec without a webhook
    (so nothing is delivered)."""
    return [(s, without_webhook(e)) for s, e in samples()]


async def no_gap(js, db: Database, settings: Settings) -> None:
    """Wait until ``verify`` finds every message of both streams in the database."""
    result = []

    async def check() -> bool:
        try:
            result[:] = await verify(js, db, [settings.stream_name, settings.status_stream_name])
        except psycopg.errors.UndefinedTable:  # the service has not migrated yet
            return False
        return all(r.gap == 0 for r in result)

    try:
        await wait_for(check, "verify finding every message stored")
    except AssertionError as exc:
        gaps = [(r.stream, r.missing[:5]) for r in result]
        raise AssertionError(f"verify reports a gap: {gaps}") from exc


async def outbox(db, state: str, attempts: int, age_s: float) -> None:
    await db.fetch(
        "INSERT INTO webhook_outbox (message_id, event_id, event_type, url, body, state, attempts, "
        "created_at) VALUES (%s, %s, 'job.completed', 'https://example.org/hook', '{}', %s, %s, "
        "now() - make_interval(secs => %s))",
        (str(uuid4()), uuid4(), state, attempts, age_s),
    )


PER_EVENT = 5  # steps each event reports: 4 points and its own


def carrying(job, first_step: int, *, at=NOW, points: int = PER_EVENT - 1) -> c.RunProgress:
    """The event of step ``first_step + points`` with the steps before it as points, one second
    apart, as the trainer-agent sends them."""
    own = first_step + points
    return c.RunProgress(
        occurred_at=at + timedelta(seconds=own),
        job_id=job,
        datacenter="fra1",
        step=own,
        total_steps=1000,
        train_loss=1.0 / own,
        learning_rate=1e-4,
        power_w=200.0,
        accounting=c.RunAccounting(
            tokens_seen=100 * own, tokens_with_padding=120 * own, energy_wh=0.5 * own
        ),
        points=[
            c.MetricPoint(
                step=s,
                occurred_at=at + timedelta(seconds=s),
                train_loss=1.0 / s,
                learning_rate=1e-4,
                tokens_seen=100 * s,
                tokens_with_padding=120 * s,
                step_time_s=0.25,
            )
            for s in range(first_step, own)
        ],
    )


def roll_back(db, migration: str) -> None:
    """Roll ``migration`` back in the test's schema, as yoyo's rollback command would."""
    backend = get_backend(yoyo_uri(db.url, db.schema))
    try:
        with resources.as_file(resources.files("metatune_telemetry") / "migrations") as path:
            chosen = read_migrations(str(path)).filter(lambda m: m.id == migration)
            with backend.lock():
                backend.rollback_migrations(backend.to_rollback(chosen))
    finally:
        backend.connection.close()


def study(url: str):
    """A study of three trials: two complete (the second better), the third is cancelled; the
    events before its end, and the two that can end it (the stop, the last trial's)."""
    sid, jobs = uuid4(), [uuid4() for _ in range(3)]
    spec = SPEC.model_validate({**SPEC.model_dump(), "webhook_url": url, "name": "sst2-sweep"})
    before = [(subjects.DATASETS_SUBMITTED, submitted(sid, spec))]
    for i, job in enumerate(jobs):
        rank = CONFIG.model_copy(update={"rank": 4 * (i + 1)})
        trial = requested(job, sid, spec=spec, trial_index=i, config=rank, metric_name="accuracy")
        before.append((subjects.JOBS_REQUESTED, trial))
    before += [started(job, study_id=sid) for job in jobs]
    before += [
        run_completed(jobs[0], sid, 0.81, "adapters/a0.tar", 1500.0, 300.0),
        run_completed(jobs[1], sid, 0.88, "adapters/a1.tar", 2500.0, 200.0),
    ]
    stop = (
        subjects.STUDIES_STOPPED,
        c.StudyStopped(
            occurred_at=NOW + timedelta(hours=3),
            study_id=sid,
            reason=c.StopReason.budget,
            trials_requested=3,
            trials_finished=2,
            metric_name="accuracy",
        ),
    )
    last = (
        subjects.JOBS_CANCELLED,
        c.JobCancelled(occurred_at=NOW + timedelta(hours=4), job_id=jobs[2], study_id=sid),
    )
    return sid, jobs, before, stop, last


def run_completed(job, study, accuracy: float, adapter: str, wh: float, grams: float):
    return (
        subjects.runs_completed("fra1"),
        c.RunCompleted(
            occurred_at=NOW + timedelta(hours=2),
            job_id=job,
            study_id=study,
            datacenter="fra1",
            config=CONFIG,
            metrics=c.RunMetrics(val_loss=0.5, accuracy=accuracy),
            steps=100,
            adapter_key=adapter,
            accounting=c.RunAccounting(energy_wh=wh, emissions_g=grams),
        ),
    )


def progress(job, step, hours, datacenter="fra1", at=NOW):
    accounting = c.RunAccounting(
        tokens_seen=100 * step,
        tokens_with_padding=120 * step,
        energy_wh=sum(h.energy_wh for h in hours),
        hours=hours,
    )
    return c.RunProgress(
        occurred_at=at,
        job_id=job,
        datacenter=datacenter,
        step=step,
        total_steps=100,
        power_w=300.0,
        accounting=accounting,
    )


def hour(i, wh, g, dc="fra1", pue=1.2):
    return c.HourlyEnergy(
        hour=NOW + timedelta(hours=i),
        datacenter=dc,
        pue=pue,
        energy_wh=wh,
        g_per_kwh=g,
        emissions_g=wh / 1000 * pue * g if g is not None else 0.0,
    )


async def record_two_trials(db) -> UUID:
    """A study of two trials at fra1 (DE, PUE 1.2) on 2 GPUs each: the first metered 500 and 250 Wh
    in two hours priced at 300 and 100 g/kWh; the second 100 Wh in an unpriced hour, on a CPU."""
    study, job, job2 = uuid4(), uuid4(), uuid4()
    spec = SPEC.model_copy(update={"webhook_url": None})
    status = c.AgentStatus(
        occurred_at=NOW,
        datacenter="fra1",
        region="DE",
        gpus_total=8,
        gpus_free=7,
        gpu_model="H100",
        power_per_gpu_w=700.0,
        pue=1.2,
    )
    hours = [hour(0, 500.0, 300.0), hour(1, 250.0, 100.0)]
    done = c.RunCompleted(
        occurred_at=NOW + timedelta(hours=2),
        job_id=job,
        study_id=study,
        datacenter="fra1",
        config=CONFIG,
        metrics=c.RunMetrics(val_loss=0.3),
        steps=100,
        accounting=c.RunAccounting(
            tokens_seen=9000,
            tokens_with_padding=10_000,
            energy_wh=750.0,
            wall_seconds=5400.0,
            hours=hours,
        ),
    )
    unpriced = c.RunCompleted(
        occurred_at=NOW + timedelta(hours=2),
        job_id=job2,
        study_id=study,
        datacenter="fra1",
        config=CONFIG,
        metrics=c.RunMetrics(val_loss=0.4),
        steps=100,
        accounting=c.RunAccounting(
            energy_wh=100.0, wall_seconds=600.0, hours=[hour(0, 100.0, None)]
        ),
        # trained on the CPU of a datacenter whose registry lists H100s: disclosed as measured
        hardware=c.Hardware(device="cpu", cpu_model="AMD EPYC 7B13", precision="fp32"),
    )
    events = [
        (subjects.DATASETS_SUBMITTED, submitted(study, spec)),
        (subjects.agent_status("fra1"), status),
    ]
    for i, j in enumerate((job, job2)):
        trial = requested(j, study, spec=spec, trial_index=i, gpus=2, power_kw=0.7)
        events.append((subjects.JOBS_REQUESTED, trial))
    events += [
        started(job, study_id=study),
        started(job2, study_id=study),
        (subjects.run_progress("fra1", job), progress(job, 10, hours[:1])),
        (subjects.runs_completed("fra1"), done),
        (subjects.runs_completed("fra1"), unpriced),
    ]
    await EventWriter(db).write(incoming(events))
    return study
