"""`metatune events`: history is counted after the filters, and `--study` follows a study's jobs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import nats

from metatune import subjects
from metatune.bus import ensure_streams, headers_for
from metatune.contracts import (
    CarbonForecast,
    DatasetLocation,
    ErrorEvent,
    ErrorKind,
    JobRequested,
    LoraConfig,
    RunProgress,
    StudySpec,
    TaskType,
)
from metatune.settings import Settings
from tests.support.cli import run
from tests.support.servers import free_port


async def test_last_counts_after_filters_and_study_includes_its_jobs(
    private_nats: str, env_for
) -> None:
    settings = Settings(nats_url=private_nats)
    now = datetime.now(UTC)
    study, other = uuid4(), uuid4()
    job = uuid4()
    spec = StudySpec(
        dataset=DatasetLocation(kind="object", ref="d.jsonl"),
        task=TaskType.classification,
        base_model="all-MiniLM-L6-v2",
        deadline=now + timedelta(days=1),
    )
    nc = await nats.connect(private_nats)
    js = nc.jetstream()
    await ensure_streams(js, settings)

    async def publish(subject: str, event) -> None:
        await js.publish(subject, event.to_bytes(), headers=headers_for(event))

    await publish(
        subjects.JOBS_REQUESTED,
        JobRequested(
            occurred_at=now,
            job_id=job,
            study_id=study,
            trial_index=0,
            spec=spec,
            config=LoraConfig(),
            estimated_gpu_hours=1,
            power_kw=0.3,
            deadline=now + timedelta(days=1),
        ),
    )
    for step in range(3):
        await publish(
            subjects.run_progress("fra1", job),
            RunProgress(occurred_at=now, job_id=job, datacenter="fra1", step=step, total_steps=10),
        )
    for n in range(
        30
    ):  # noise after the interesting events: a plain "last N" would show only these
        await publish(
            subjects.errors("profiler"),
            ErrorEvent(
                occurred_at=now,
                service="profiler",
                kind=ErrorKind.bad_input,
                code="x",
                message=f"noise {n}",
                correlation_id=str(other),
            ),
        )
    hour = now.replace(minute=0, second=0, microsecond=0)
    await publish(  # an hourly forecast: left out unless asked for
        subjects.forecasts("DE"),
        CarbonForecast(
            occurred_at=now,
            region="DE",
            issued_at=hour,
            start=hour,
            model_version="test",
            g_per_kwh=[300.0] * 168,
            p10_g_per_kwh=[250.0] * 168,
            p90_g_per_kwh=[350.0] * 168,
        ),
    )
    await nc.close()

    env = env_for(METATUNE_NATS_URL=private_nats)
    everything = run(["events", "--json", "--last", "100"], env, timeout=60)
    kinds = {json.loads(line)["subject"].split(".")[1] for line in everything.stdout.splitlines()}
    assert kinds == {"jobs", "runs", "errors"}  # no forecast by default
    with_forecasts = run(["events", "--json", "--last", "100", "--forecasts"], env, timeout=60)
    assert subjects.forecasts("DE") in with_forecasts.stdout
    only = run(["events", "--json", "--last", "100", "--kind", "jobs", "--kind", "runs"], env)
    kinds = {json.loads(line)["subject"].split(".")[1] for line in only.stdout.splitlines()}
    assert kinds == {"jobs", "runs"}
    filtered = run(
        ["events", "--json", "--last", "2", "--subject", "metatune.runs.>"], env, timeout=60
    )
    assert filtered.returncode == 0, filtered.stderr
    steps = [json.loads(line)["step"] for line in filtered.stdout.splitlines()]
    assert steps == [1, 2]
    mine = run(["events", "--json", "--last", "10", "--study", str(study)], env, timeout=60)
    lines = [json.loads(line) for line in mine.stdout.splitlines()]
    assert [e["subject"] for e in lines] == [subjects.JOBS_REQUESTED] + [
        subjects.run_progress("fra1", job)
    ] * 3
    by_prefix = run(["events", "--json", "--last", "10", "--study", str(study)[:8]], env)
    assert by_prefix.stdout == mine.stdout, by_prefix.stderr  # a unique prefix, as elsewhere
    unknown = run(["events", "--study", str(other)[:8]], env)
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.strip() == (
        f"error: no study with an id starting '{str(other)[:8]}' in the event log"
    )


def test_an_unknown_kind_is_refused_naming_the_kinds(env_for) -> None:
    env = env_for(METATUNE_NATS_URL=f"nats://127.0.0.1:{free_port()}")  # refused before connecting
    refused = run(["events", "--kind", "runs", "--kind", "run"], env)
    assert refused.returncode == 2 and refused.stdout == ""
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("error: unknown --kind run: the kinds are datasets, jobs, studies")
