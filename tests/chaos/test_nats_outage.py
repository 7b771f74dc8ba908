"""Stop nats-server for 60 s while a job trains: the run goes on, its checkpoint uploads and its
completion are retried until the bus is back, and the job completes once, trained once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import nats
import pytest

from metatune import subjects
from metatune.bus import CHECKPOINTS_BUCKET, ObjectStore
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    LoraConfig,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
)
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import TINY_TRAINING, job_request
from tests.support.waiting import wait_for

from .conftest import RestartableNats, of, stream_events, upload

pytestmark = pytest.mark.chaos
STEPS = 40
OUTAGE_S = 60.0


async def test_a_60_s_nats_outage_mid_training_loses_nothing(
    chaos_nats: RestartableNats, binary_slice: Path, tmp_path: Path
) -> None:
    url = chaos_nats.url
    dataset = await upload(url, binary_slice)
    settings = AgentSettings(
        nats_url=url,
        data_dir=tmp_path / "fra1",
        heartbeat_s=0.5,
        ack_wait_s=10.0,
        retry_backoff_s=0.2,
        agent_checkpoint_every=5,
        agent_progress_interval_s=0.0,
        agent_status_interval_s=0.5,
        agent_idle_seconds=0.05,
        agent_curve_stop=False,
        bus_retry_budget_s=180.0,
        bus_retry_max_s=2.0,
    )
    agent_service = create_agent("fra1", settings)
    agent = agent_service.runtime
    request = job_request(dataset, max_steps=STEPS)
    job_id: UUID = request.job_id
    assignment = Assignment(
        occurred_at=datetime.now(UTC),
        job_id=job_id,
        study_id=request.study_id,
        datacenter="fra1",
        action=AssignmentAction.start,
        plan_version=1,
        spec=request.spec,
        config=LoraConfig(**TINY_TRAINING, max_steps=STEPS),
    )
    seen_steps: list[int] = []
    async with agent_service.running():
        nc = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.5)
        try:

            async def on_progress(msg) -> None:
                seen_steps.append(RunProgress.model_validate_json(msg.data).step)

            await nc.subscribe(subjects.run_progress("fra1", job_id), cb=on_progress)
            await nc.jetstream().publish(
                subjects.assignments("fra1"),
                assignment.to_bytes(),
                headers={"Nats-Msg-Id": str(assignment.event_id)},
            )
            await wait_for(
                lambda: any(step >= 6 for step in seen_steps), "training under way", timeout=120
            )  # a checkpoint at 5

            chaos_nats.stop()
            job = agent.jobs.get(job_id)
            step_at_stop = job.step if job else STEPS
            # The fault itself: the server stays down this long (not a wait for a state).
            await asyncio.sleep(OUTAGE_S)
            # Training goes on without the bus; on a slow machine 60 s may not cover a step, so
            # the outage lasts until one is done (bounded), not until a guessed time.
            await wait_for(
                lambda: job_id not in agent.jobs or job.step > step_at_stop,
                "a training step during the outage",
                timeout=300,
            )
            trained_in_outage = (job.step if job_id in agent.jobs else STEPS) - step_at_stop
            chaos_nats.start()

            await wait_for(lambda: job_id not in agent.jobs, "run finished", timeout=180)
        finally:
            await nc.close()
        await wait_for(lambda: _completed(url, job_id), "completion on the bus", timeout=120)

    assert trained_in_outage > 0  # training went on while the bus was down
    events = await stream_events(url)
    completed = of(events, RunCompleted, job_id)
    assert len(completed) == 1 and completed[0].steps == STEPS and completed[0].datacenter == "fra1"
    assert not of(events, RunFailed, job_id) and not of(events, RunPaused, job_id)
    steps = [p.step for p in of(events, RunProgress, job_id)]
    assert steps == sorted(steps)  # never went back to a checkpoint: nothing trained twice
    nc = await nats.connect(url)
    try:
        assert await ObjectStore(nc.jetstream()).exists(CHECKPOINTS_BUCKET, str(job_id))
        info = await nc.jetstream().consumer_info("METATUNE", "trainer-agent-fra1")
        assert (
            info.num_ack_pending == 0 and info.num_pending == 0
        )  # the assignment was acknowledged
    finally:
        await nc.close()


async def _completed(url: str, job_id: UUID) -> bool:
    return bool(of(await stream_events(url), RunCompleted, job_id))
