"""kill -9 a trainer-agent mid-run: the scheduler declares it lost after its lease, the job resumes
at another datacenter from its last checkpoint and ends with the loss of an uninterrupted run; when
the killed agent comes back, its redelivered (stale) start is ignored: one job, trained once. The
greenest datacenter (lon1) has no agent at all: no start or resume ever goes there."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import nats
import pytest

from metatune import subjects
from metatune.bus import CHECKPOINTS_BUCKET, ObjectStore
from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    ErrorEvent,
    RunCompleted,
    RunFailed,
    RunProgress,
)
from metatune_scheduler.app import create_service as create_scheduler
from metatune_scheduler.settings import SchedulerSettings
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import (
    FAST_SITE,
    TINY_TRAINING,
    job_request,
    request_for,
    small_registry,
)
from tests.support.waiting import wait_for

from .conftest import (
    AGENT_ENV,
    RestartableNats,
    forecast_now,
    of,
    publish,
    spawn,
    stream_events,
    upload,
)

pytestmark = pytest.mark.chaos
STEPS = 12
LEASE_S = 3.0
ACK_WAIT_S = 4.0


def agent_settings(url: str, data_dir: Path) -> AgentSettings:
    return AgentSettings(
        nats_url=url,
        data_dir=data_dir,
        heartbeat_s=0.5,
        ack_wait_s=ACK_WAIT_S,
        retry_backoff_s=0.2,
        agent_checkpoint_every=2,
        agent_progress_interval_s=0.0,
        agent_status_interval_s=0.5,
        agent_idle_seconds=0.05,
        agent_curve_stop=False,
    )


async def test_killed_agent_s_job_resumes_elsewhere_from_its_checkpoint(
    chaos_nats: RestartableNats, binary_slice: Path, tmp_path: Path, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="metatune.agent")
    url = chaos_nats.url
    dataset = await upload(url, binary_slice)
    scheduler = create_scheduler(
        settings=SchedulerSettings(
            nats_url=url,
            data_dir=tmp_path / "scheduler",
            heartbeat_s=0.5,
            agent_lease_s=LEASE_S,
            retry_backoff_s=0.2,
        ),
        registry=small_registry("fra1", "osl1", "lon1"),  # lon1: no agent
        debounce_s=0.2,
    )
    fra1 = create_agent("fra1", agent_settings(url, tmp_path / "fra1"))
    nc = await nats.connect(url)
    progress: list[RunProgress] = []
    osl1 = spawn(
        "metatune_trainer_agent",
        {
            "METATUNE_NATS_URL": url,
            "METATUNE_DATA_DIR": str(tmp_path / "osl1-killed"),
            "METATUNE_ACK_WAIT_S": str(ACK_WAIT_S),
            **AGENT_ENV,
        },
        tmp_path / "osl1.log",
        "--datacenter",
        "osl1",
    )
    try:

        async def on_progress(msg) -> None:
            event = RunProgress.model_validate_json(msg.data)
            progress.append(event)
            if event.datacenter == "osl1" and event.step >= 4:
                osl1.kill9()  # mid-run, after the checkpoint of step 2 (and maybe 4)

        await nc.subscribe(subjects.RUNS_PROGRESS_ALL, cb=on_progress)
        statuses: list[AgentStatus] = []

        async def on_status(msg) -> None:
            statuses.append(AgentStatus.model_validate_json(msg.data))

        await nc.subscribe(subjects.AGENTS_STATUS_ALL, cb=on_status)
        async with scheduler.running(), fra1.running():
            js = nc.jetstream()
            await wait_for(
                lambda: any(s.datacenter == "osl1" for s in statuses), "osl1 agent up", timeout=90
            )
            live = scheduler.runtime.scheduler.live
            await wait_for(lambda: {"fra1", "osl1"} <= live, "both agents heard", timeout=30)
            for region, value in (
                ("DE", 300.0),
                ("NO", 20.0),
                ("GB", 5.0),
            ):  # osl1 is the greener of the two with an agent: the job starts there
                forecast = forecast_now(region, value)
                await publish(js, subjects.forecasts(region), forecast)
            job = job_request(dataset, max_steps=STEPS)
            await publish(js, subjects.JOBS_REQUESTED, job)

            await wait_for(lambda: osl1.proc.poll() is not None, "osl1 killed mid-run", timeout=120)
            killed_at = max(p.step for p in progress if p.datacenter == "osl1")
            assert killed_at < STEPS
            await wait_for(
                lambda: any(p.datacenter == "fra1" and p.job_id == job.job_id for p in progress),
                "resumed at fra1",
                timeout=60,
            )
            store = ObjectStore(js)
            await wait_for(lambda: _completed(url, job.job_id), "completed at fra1", timeout=120)

            # the killed agent comes back: capacity again; its redelivered start is stale and ignored
            osl1_back = create_agent("osl1", agent_settings(url, tmp_path / "osl1"))
            osl1_agent = osl1_back.runtime
            async with osl1_back.running():
                await wait_for(
                    lambda: "osl1" not in scheduler.runtime.scheduler.lost,
                    "osl1 back in the plan",
                    timeout=30,
                )
                await wait_for(
                    lambda: _consumer_drained(js, "trainer-agent-osl1"),
                    "osl1 assignments handled",
                    timeout=60,
                )
                assert job.job_id not in osl1_agent.jobs
                stale = f"stale start of job {job.job_id} ignored"
                await wait_for(
                    lambda: any(stale in r.getMessage() for r in caplog.records),
                    "killed start redelivered",
                    timeout=60,
                )
            assert await store.exists(CHECKPOINTS_BUCKET, str(job.job_id))
    finally:
        osl1.kill9()
        await nc.close()

    events = await stream_events(url)
    completed = of(events, RunCompleted, job.job_id)
    assert len(completed) == 1 and completed[0].datacenter == "fra1" and completed[0].steps == STEPS
    assert not of(events, RunFailed, job.job_id)
    lost = [e for e in of(events, ErrorEvent) if e.code == "agent_lost"]
    assert len(lost) == 1 and lost[0].details == {"datacenter": "osl1", "jobs": [str(job.job_id)]}
    resumed = [p.step for p in of(events, RunProgress, job.job_id) if p.datacenter == "fra1"]
    assert 2 <= min(resumed) <= killed_at  # from the last checkpoint, not from step 0
    after_kill = [
        p
        for p in of(events, RunProgress, job.job_id)
        if p.datacenter == "osl1" and p.step > killed_at
    ]
    assert not after_kill  # the killed agent never trained it again
    runs = [
        (a.datacenter, a.action)
        for a in of(events, Assignment, job.job_id)
        if a.action in (AssignmentAction.start, AssignmentAction.resume)
    ]
    # every start and resume went to a datacenter with a live agent: never to lon1, the greenest
    assert runs == [("osl1", AssignmentAction.start), ("fra1", AssignmentAction.resume)]

    straight = await asyncio.to_thread(
        run_training, request_for(binary_slice, **TINY_TRAINING, max_steps=STEPS), site=FAST_SITE
    )
    assert completed[0].metrics.val_loss == pytest.approx(straight.evaluation.loss, abs=1e-4)


async def _completed(url: str, job_id) -> bool:
    return bool(of(await stream_events(url), RunCompleted, job_id))


async def _consumer_drained(js, durable: str) -> bool:
    info = await js.consumer_info("METATUNE", durable)
    return info.num_pending == 0 and info.num_ack_pending == 0
