"""The plan matches what the agents can do: a study of three trials driven through a fast simulated
clock (an hour every 2 s) with real NATS, the real scheduler and a real trainer-agent training the
embedded MiniLM on a small slice.

Start-up (loading model and data) takes several simulated hours here, as in production it takes
minutes of a real hour. A forecast that turns dirty while the trials are starting up makes pausing
them attractive; the scheduler must still let each run until it has saved a checkpoint past its
start (its minimum run), plan the rest from the measured rate and start-up, and report the trial
whose deadline cannot hold once, not at every re-plan. Every trial must complete."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from uuid import NAMESPACE_DNS, uuid5

import nats
import pytest

from metatune import subjects
from metatune.bus import DATASETS_BUCKET, ObjectStore, ensure_streams
from metatune.clock import floor_hour
from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    CarbonForecast,
    DatasetLocation,
    InfeasibleAction,
    InfeasibleSituation,
    JobInfeasible,
    JobRequested,
    LoraConfig,
    RegionGroup,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
    StudySpec,
    TaskType,
)
from metatune.registry import default_registry
from metatune.settings import Settings
from metatune_scheduler.app import create_service as create_scheduler
from metatune_scheduler.settings import SchedulerSettings
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import TINY_TRAINING
from tests.support.waiting import received_on, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SECONDS_PER_HOUR = 2.0  # the setting: one simulated hour every 2 real seconds
SIM_START = datetime(2026, 1, 5, tzinfo=UTC)
STEPS = 16
CHECKPOINT_EVERY = 4
DIRTY_HOURS = 40  # the forecast's dirty stretch: far longer than a start-up plus the minimum run


def registry_file(path: Path, gpus: int) -> Path:
    """fra1 alone, with ``gpus`` GPUs: the three trials compete for it."""
    dc = default_registry().get("fra1")
    lines = ["[[datacenter]]"]
    for key, value in dc.model_dump(mode="json", exclude_none=True).items():
        lines.append(f"{key} = {value!r}".replace("'", '"'))
    path.write_text("\n".join(lines).replace("gpus = 16", f"gpus = {gpus}") + "\n")
    return path


def forecast(now: datetime, value: Callable[[int], float], issued: int) -> CarbonForecast:
    start = floor_hour(now)
    series = [value(h) for h in range(168)]
    return CarbonForecast(
        event_id=uuid5(NAMESPACE_DNS, f"closed-loop-forecast-{issued}"),
        occurred_at=now,
        region="DE",
        issued_at=now + timedelta(seconds=issued),
        start=start,
        model_version="test",
        g_per_kwh=series,
        p10_g_per_kwh=series,
        p90_g_per_kwh=series,
    )


def trial(index: int, study: object, dataset: DatasetLocation, now: datetime, deadline_h: int):
    spec = StudySpec(
        dataset=dataset,
        task=TaskType.classification,
        base_model="all-MiniLM-L6-v2",
        deadline=now + timedelta(hours=200),
        region_group=RegionGroup.EU,
        home_datacenter="fra1",
    )
    return JobRequested(
        occurred_at=now,
        job_id=uuid5(NAMESPACE_DNS, f"closed-loop-job-{index}"),
        study_id=study,
        trial_index=index,
        spec=spec,
        config=LoraConfig(**TINY_TRAINING, max_steps=STEPS, seed=13 + index),
        gpus=1,
        estimated_gpu_hours=STEPS / 2,  # the recommender's guess: 8 h
        power_kw=0.3,
        deadline=now + timedelta(hours=deadline_h),
    )


async def test_every_trial_progresses_between_pauses_completes_and_is_reported_late_once(
    private_nats: str, text_slice, tmp_path: Path
) -> None:
    url = private_nats
    common = {
        "nats_url": url,
        "clock": "simulated",
        "sim_seconds_per_hour": SECONDS_PER_HOUR,
        "sim_start": SIM_START,
        "heartbeat_s": 0.5,
        "retry_backoff_s": 0.2,
        "registry_path": registry_file(tmp_path / "registry.toml", gpus=2),
    }
    scheduler = create_scheduler(
        settings=SchedulerSettings(
            **common,
            data_dir=tmp_path / "scheduler",
            scheduler_min_run_h=1.0,
            agent_lease_s=600.0,  # one loaded process runs everything: no agent is lost here
        ),
        debounce_s=0.2,
    )
    agent_service = create_agent(
        "fra1",
        AgentSettings(
            **common,
            data_dir=tmp_path / "fra1",
            agent_checkpoint_every=CHECKPOINT_EVERY,
            agent_progress_interval_s=0.5,
            agent_status_interval_s=0.5,
            agent_idle_seconds=0.05,
            agent_curve_stop=False,
        ),
    )
    rows = text_slice("intents_binary.jsonl.gz", 96, tmp_path / "intents.jsonl")
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await ensure_streams(js, Settings(nats_url=url))
        await ObjectStore(js).put_file(DATASETS_BUCKET, "studies/closed-loop.jsonl", rows)
        dataset = DatasetLocation(kind="object", ref="studies/closed-loop.jsonl")
        seen = {
            "assignments": await received_on(nc, subjects.ASSIGNMENTS_ALL, Assignment),
            "progress": await received_on(nc, subjects.RUNS_PROGRESS_ALL, RunProgress),
            "paused": await received_on(nc, subjects.RUNS_PAUSED_ALL, RunPaused),
            "completed": await received_on(nc, subjects.RUNS_COMPLETED_ALL, RunCompleted),
            "failed": await received_on(nc, subjects.RUNS_FAILED_ALL, RunFailed),
            "infeasible": await received_on(nc, subjects.JOBS_INFEASIBLE, JobInfeasible),
            "status": await received_on(nc, subjects.AGENTS_STATUS_ALL, AgentStatus),
        }

        async def publish(subject: str, event) -> None:
            await js.publish(
                subject, event.to_bytes(), headers={"Nats-Msg-Id": str(event.event_id)}
            )

        async with scheduler.running(), agent_service.running():
            await wait_for(lambda: seen["status"], "the agent's heartbeat", timeout=120)
            now = scheduler.clock.now()
            await publish(subjects.forecasts("DE"), forecast(now, lambda h: 100.0, issued=0))
            study = uuid5(NAMESPACE_DNS, "closed-loop-study")
            # the third trial's deadline cannot hold: 2 h, less than a start-up
            jobs = [trial(i, study, dataset, now, 200 if i < 2 else 2) for i in range(3)]
            for job in jobs:
                await publish(subjects.JOBS_REQUESTED, job)
            await wait_for(
                lambda: sum(a.action is AssignmentAction.start for a in seen["assignments"]) >= 2,
                "two trials started",
                timeout=120,
            )
            # while they start up, the grid turns dirty for DIRTY_HOURS, clean after: pausing
            # now would save carbon, but would throw their start-up away
            dirty_from = scheduler.clock.now()
            await publish(
                subjects.forecasts("DE"),
                forecast(dirty_from, lambda h: 900.0 if h <= DIRTY_HOURS else 50.0, issued=1),
            )
            await wait_for(
                lambda: len({c.job_id for c in seen["completed"]}) == 3 or seen["failed"],
                "all three trials completed",
                timeout=900,
            )
            finished_at = scheduler.clock.now()
            state = scheduler.runtime.scheduler.state
            measured = {job.job_id: state.jobs[job.job_id] for job in jobs}
    finally:
        await nc.close()

    assert not seen["failed"], [f.message for f in seen["failed"]]
    completed = {c.job_id: c for c in seen["completed"]}
    assert set(completed) == {job.job_id for job in jobs}
    assert all(c.steps == STEPS for c in completed.values())

    # a pause only after a checkpoint past the step its session started from (never at step 0)
    pauses = {
        job.job_id: [p.step for p in seen["paused"] if p.job_id == job.job_id] for job in jobs
    }
    notices = Counter((n.job_id, n.situation) for n in seen["infeasible"])
    hours = (finished_at - SIM_START).total_seconds() / 3600
    print(
        f"closed loop: {hours:.0f} simulated hours, "
        f"{sum(map(len, pauses.values()))} pauses at steps {list(pauses.values())}, "
        f"{len(completed)} completions, {len(seen['infeasible'])} infeasible events "
        f"({dict(Counter(n.situation.value for n in seen['infeasible']))}), "
        f"start-up {[round(r.startup_h or 0, 1) for r in measured.values()]} h, "
        f"{sum(a.action is AssignmentAction.resume for a in seen['assignments'])} resumes"
    )
    for job_id, steps in pauses.items():
        assert all(b >= a + CHECKPOINT_EVERY for a, b in pairwise([0, *steps])), (job_id, steps)
    assert sum(map(len, pauses.values())) >= 1  # the dirty stretch did make the plan pause

    # the scheduler planned from what the agent measured: its start-up and rate
    reports = [p for p in seen["progress"] if p.startup_s is not None]
    assert reports and all(p.session_start_step is not None for p in reports)
    assert all(record.startup_h is not None for record in measured.values())
    assert all(record.steps_per_hour is not None for record in measured.values())

    # one notice per job and situation, not one per simulated hour; the late trial ran late
    assert all(count == 1 for count in notices.values()), notices
    late = jobs[2]
    assert notices[(late.job_id, InfeasibleSituation.late)] == 1
    (notice,) = [n for n in seen["infeasible"] if n.job_id == late.job_id]
    assert notice.policy is InfeasibleAction.run_late and notice.deadline == late.deadline
    assert {o.action for o in notice.options} >= {InfeasibleAction.run_late, InfeasibleAction.drop}
    assert completed[late.job_id].occurred_at > late.deadline
