"""Run events are per datacenter: one datacenter's agent cannot speak for another's jobs.

The server refuses an agent's run event on another datacenter's subject; and a forgery that does
reach the log (published with a privileged credential on the wrong datacenter's subject, or
naming another datacenter than its subject) is refused by every consumer (scheduler, the
recommender's knowledge base, telemetry) as a ``foreign_run_event`` error, never a state change,
while the genuine completion that comes later counts, and becomes the study's best that the
agents' curve stopper reads. ``metatune study show``, ``results`` and the client read the log by
the same rule: an agent's forgery under its own subject is left out."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from nats.js.errors import KeyNotFoundError

from metatune import subjects
from metatune.bus import ASSIGNMENTS_BUCKET, STUDIES_BUCKET, headers_for
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    CurrentAssignment,
    DatasetSubmitted,
    ErrorEvent,
    Event,
    FailureReason,
    JobRequested,
    RunAccounting,
    RunCompleted,
    RunFailed,
    RunMetrics,
    RunProgress,
)
from metatune.knowledge import StudyBest
from metatune.knowledge.store import KnowledgeStore
from metatune.provenance import FOREIGN_RUN_EVENT
from metatune.service import Service
from metatune.settings import Settings
from metatune_cli.client import AsyncClient
from metatune_recommender.adapters.flywheel import register_flywheel
from metatune_scheduler.app import create_service as create_scheduler
from metatune_scheduler.settings import SchedulerSettings
from metatune_telemetry.app import create_service as create_telemetry
from tests.support.builders import small_registry
from tests.support.cli import run
from tests.support.databases import count, schema, store  # noqa: F401  (fixtures)
from tests.support.samples import CONFIG, NOW, SPEC
from tests.support.secured_bus import FRA1, OSL1, REFUSED, SecuredBus, violation
from tests.support.waiting import wait_for

JOB = UUID("004aea17-75ec-4dd9-9aad-724d18c9f7c4")  # fixed: it names a parametrized test


@pytest.mark.parametrize(
    "subject",
    [
        subjects.runs_completed("osl1"),
        subjects.runs_failed("osl1"),
        subjects.runs_paused("osl1"),
        subjects.run_progress("osl1", JOB),
    ],
)
async def test_an_agent_cannot_publish_another_datacenters_run_events(
    secured: SecuredBus, admin, subject: str
) -> None:
    errors: list[Exception] = []
    async with secured.client(FRA1, errors) as nc:
        js = nc.jetstream(timeout=1.0)
        with pytest.raises(REFUSED):
            await js.publish(subject, b"{}")
        await wait_for(violation(errors, f'publish to "{subject}"'), timeout=5)
        own = subject.replace(".osl1.", ".fra1.")
        await js.publish(own, b"{}")  # its own datacenter's subject is its to use
    info = await admin.jetstream().stream_info("METATUNE", subjects_filter="metatune.runs.osl1.>")
    assert not info.state.subjects  # nothing reached the log


def _requested(job, study, index: int) -> JobRequested:
    return JobRequested(
        occurred_at=NOW,
        job_id=job,
        study_id=study,
        trial_index=index,
        spec=SPEC,
        config=CONFIG,
        estimated_gpu_hours=1.0,
        power_kw=0.3,
        deadline=NOW + timedelta(days=2),
    )


def _completion(job, study, datacenter: str, accuracy: float) -> RunCompleted:
    return RunCompleted(
        occurred_at=NOW + timedelta(hours=1),
        job_id=job,
        study_id=study,
        datacenter=datacenter,
        config=CONFIG,
        metrics=RunMetrics(val_loss=0.2, accuracy=accuracy),
        steps=100,
        accounting=RunAccounting(energy_wh=5.0),
        base_model=SPEC.base_model,
        task=SPEC.task,
        planned_steps=100,
    )


async def test_forged_run_events_are_refused_by_every_consumer_and_the_genuine_one_counts(
    secured: SecuredBus,
    admin,
    store: KnowledgeStore,  # noqa: F811
    schema: str,  # noqa: F811
) -> None:
    study, running, pending = uuid4(), uuid4(), uuid4()
    js = admin.jetstream()

    async def put(subject: str, event: Event, msg_id: str | None = None) -> None:
        headers = {**headers_for(event), **({"Nats-Msg-Id": msg_id} if msg_id else {})}
        await js.publish(subject, event.to_bytes(), headers=headers, stream="METATUNE")

    # the log as the scheduler left it: two trials, the first started at osl1 (its KV record too)
    start = Assignment(
        occurred_at=NOW,
        job_id=running,
        study_id=study,
        datacenter="osl1",
        action=AssignmentAction.start,
        plan_version=1,
        spec=SPEC,
        config=CONFIG,
    )
    await put(subjects.JOBS_REQUESTED, _requested(running, study, 0))
    await put(subjects.JOBS_REQUESTED, _requested(pending, study, 1))
    await put(subjects.assignments("osl1"), start)
    kv = await js.key_value(ASSIGNMENTS_BUCKET)
    await kv.put(str(running), CurrentAssignment.of(start).model_dump_json().encode())

    refused: dict[str, set] = {"scheduler": set(), "recommender": set(), "telemetry": set()}

    async def on_error(msg) -> None:
        error = ErrorEvent.model_validate_json(msg.data)
        if error.code == FOREIGN_RUN_EVENT and error.service in refused:
            # telemetry's reject names the message; its excerpt is the event itself
            quoted = error.details.get("event_id") or json.loads(error.payload_excerpt)["event_id"]
            refused[error.service].add(quoted)

    await admin.subscribe(subjects.ERRORS_ALL, cb=on_error)
    scheduler = create_scheduler(
        secured.settings("scheduler", SchedulerSettings, agent_lease_s=600.0),
        registry=small_registry("osl1"),
        solve_in_process=False,
    )
    flywheel = Service("recommender", settings=secured.settings("recommender"))
    register_flywheel(flywheel, store)
    telemetry = create_telemetry(
        secured.settings("telemetry", telemetry_http_port=0), schema=schema
    )
    async with scheduler.running(), flywheel.running(), telemetry.running():
        state = scheduler.runtime.scheduler.state  # type: ignore[attr-defined]
        await wait_for(lambda: running in state.jobs and pending in state.jobs, timeout=60)
        # forgeries, published with a privileged credential: each from fra1, which runs neither job
        forged_done = _completion(running, study, "fra1", 0.9999)
        forged_fail = RunFailed(  # names osl1, but fra1's subject carries it
            occurred_at=NOW,
            job_id=pending,
            study_id=study,
            datacenter="osl1",
            reason=FailureReason.internal,
            message="forged",
        )
        forged_progress = RunProgress(
            occurred_at=NOW,
            job_id=running,
            datacenter="fra1",
            step=99,
            total_steps=100,
            steps_per_hour=1e6,
        )
        await put(subjects.runs_completed("fra1"), forged_done)
        await put(subjects.runs_failed("fra1"), forged_fail)
        await put(subjects.run_progress("fra1", running), forged_progress)
        forged = {str(e.event_id) for e in (forged_done, forged_fail, forged_progress)}
        await wait_for(lambda: refused["scheduler"] == forged, "the scheduler refusing", timeout=60)
        outcomes = {str(forged_done.event_id), str(forged_fail.event_id)}
        await wait_for(
            lambda: refused["recommender"] == outcomes, "the flywheel refusing", timeout=60
        )
        await wait_for(lambda: refused["telemetry"] == forged, "telemetry refusing", timeout=90)
        # nothing changed: the running job runs on, the pending one is not failed, no rate taken
        job, other = state.jobs[running], state.jobs[pending]
        assert job.status.value in {"running", "paused"} and job.location == "osl1"
        assert other.status.value != "failed" and job.steps_per_hour is None
        assert await store.study_runs(study) == []
        assert await count(telemetry.runtime.db, "SELECT count(*) FROM run_results") == 0
        assert await count(telemetry.runtime.db, "SELECT count(*) FROM run_metrics") == 0

        async with secured.client(OSL1) as agent:

            async def best() -> StudyBest | None:  # what the curve stopper of any agent reads
                studies = await agent.jetstream().key_value(STUDIES_BUCKET)
                try:
                    entry = await studies.get(str(study))
                except KeyNotFoundError:
                    return None
                return StudyBest.model_validate_json(entry.value)

            assert await best() is None  # no forged best for the study's other trials to lose to
            # the genuine completion, from osl1's own agent, comes later and counts everywhere
            genuine = _completion(running, study, "osl1", 0.95)
            await agent.jetstream(timeout=5.0).publish(
                subjects.runs_completed("osl1"),
                genuine.to_bytes(),
                headers=headers_for(genuine),
            )
            await wait_for(
                lambda: job.status.value == "completed", "the scheduler folding", timeout=60
            )

            async def best_known() -> bool:
                return await best() is not None

            await wait_for(best_known, "the study's best in KV", timeout=60)
            found = await best()
            assert found is not None and (found.best, found.job_id) == (0.95, running)
        rows = await store.study_runs(study)
        assert [(r.run_id, r.metric) for r in rows] == [(str(running), 0.95)]

        async def stored() -> bool:
            return await count(telemetry.runtime.db, "SELECT count(*) FROM run_results") == 1

        await wait_for(stored, "telemetry storing the genuine result", timeout=60)
        result = await telemetry.runtime.db.fetch("SELECT datacenter, status FROM run_results")
        assert result == [("osl1", "completed")]
        assert await count(
            telemetry.runtime.db,
            "SELECT count(*) FROM event_rejects WHERE code = 'foreign_run_event'",
        ) == len(forged)


async def test_study_show_results_and_the_client_count_run_events_only_from_where_jobs_run(
    secured: SecuredBus, admin, tmp_path: Path
) -> None:
    study, trained, running = uuid4(), uuid4(), uuid4()  # both started at osl1
    js = admin.jetstream()
    for subject, event in [
        (subjects.DATASETS_SUBMITTED, DatasetSubmitted(occurred_at=NOW, study_id=study, spec=SPEC)),
        (subjects.JOBS_REQUESTED, _requested(trained, study, 0)),
        (subjects.JOBS_REQUESTED, _requested(running, study, 1)),
        *[
            (
                subjects.assignments("osl1"),
                Assignment(
                    occurred_at=NOW,
                    job_id=job,
                    study_id=study,
                    datacenter="osl1",
                    action=AssignmentAction.start,
                    plan_version=1,
                ),
            )
            for job in (trained, running)
        ],
    ]:
        await js.publish(subject, event.to_bytes(), headers=headers_for(event))

    async def publish(user: str, subject: str, event: Event) -> None:
        async with secured.client(user) as nc:
            await nc.jetstream(timeout=5.0).publish(
                subject, event.to_bytes(), headers=headers_for(event)
            )

    # fra1's agent, which runs neither job, forges under its own subject: a completion and a failure
    await publish(
        FRA1, subjects.runs_completed("fra1"), _completion(running, study, "fra1", 0.9999)
    )
    forged_fail = RunFailed(
        occurred_at=NOW,
        job_id=trained,
        study_id=study,
        datacenter="fra1",
        reason=FailureReason.internal,
        message="forged",
    )
    await publish(FRA1, subjects.runs_failed("fra1"), forged_fail)
    await publish(OSL1, subjects.runs_completed("osl1"), _completion(trained, study, "osl1", 0.95))

    genuine = (str(trained), "completed", "osl1", 0.95, None)
    untouched = (str(running), "requested", None, None, None)

    def seen(trials: list[dict]) -> list[tuple]:
        return [
            (
                t["job_id"],
                t["status"],
                t["datacenter"],
                (t["metrics"] or {}).get("accuracy"),
                t["error"],
            )
            for t in trials
        ]

    env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")} | {
        "METATUNE_NATS_URL": secured.admin_url,  # reads the log as the admin
        "METATUNE_DATA_DIR": str(tmp_path / "data"),
    }
    shown = await asyncio.to_thread(run, ["study", "show", str(study), "--json"], env)
    assert shown.returncode == 0, shown.stderr
    assert seen(json.loads(shown.stdout)["trials"]) == [genuine, untouched]
    results = await asyncio.to_thread(run, ["results", str(study), "--json"], env)
    assert results.returncode == 0, results.stderr
    assert seen(json.loads(results.stdout)) == [genuine, untouched]

    async with AsyncClient(Settings(nats_url=secured.admin_url)) as client:
        detail = await client.study(study)
        assert seen([t.model_dump(mode="json") for t in detail.trials]) == [genuine, untouched]
        assert (detail.trials_completed, detail.trials_failed) == (1, 0)
        found = await client.results(study)
        assert seen([t.model_dump(mode="json") for t in found]) == [genuine, untouched]
