"""The agent through a real nats-server: assignments in; progress, completion, failure and pause out."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import nats
import pytest

from metatune import subjects
from metatune.bus import ADAPTERS_BUCKET, CHECKPOINTS_BUCKET, ObjectStore
from metatune.clock import floor_hour
from metatune.contracts import (
    AgentStatus,
    AssignmentAction,
    CarbonForecast,
    DatasetLocation,
    ErrorEvent,
    FailureReason,
    LoraConfig,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
)
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.app import create_service
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import FAST_SITE, request_for
from tests.support.waiting import wait_for

from .agent_bus import (
    AGENT,
    CONFIG,
    Bus,
    as_json,
    assignment,
    publish_forecast,
    spec,
    upload_dataset,
)

pytestmark = pytest.mark.slow  # real training runs through the bus


@pytest.fixture(scope="module")
def nats_url(module_nats: str) -> str:
    return module_nats


@pytest.fixture
def settings(nats_url: str, tmp_path: Path) -> AgentSettings:
    return AgentSettings(
        nats_url=nats_url,
        data_dir=tmp_path / "data",
        heartbeat_s=0.5,
        ack_wait_s=3.0,
        retry_backoff_s=0.2,
    )


@pytest.fixture
async def agent_fra1(settings: AgentSettings) -> AsyncIterator[Any]:
    service = create_service("fra1", settings.model_copy(update=AGENT))
    agent = service.runtime
    async with service.running():
        yield agent


async def test_agent_trains_an_assignment_and_survives_bad_ones(
    settings: AgentSettings, agent_fra1: Any, intents_binary: Path
) -> None:
    async with Bus(settings) as bus:
        dataset = await upload_dataset(settings, intents_binary)
        await publish_forecast(bus, "DE", 300.0)
        await bus.wait_for(AgentStatus, datacenter="fra1")

        # bad inputs first: each fails its own run with a typed reason and the agent keeps serving
        bad_config = assignment("fra1", AssignmentAction.start, uuid4(), spec(dataset)).model_dump(
            mode="json"
        )
        bad_config["config"]["rank"] = 0
        await bus.assign(bad_config)
        no_data = uuid4()
        await bus.assign(
            assignment(
                "fra1",
                AssignmentAction.start,
                no_data,
                spec(DatasetLocation(kind="object", ref="absent.jsonl")),
            )
        )
        no_model = uuid4()
        await bus.assign(
            assignment(
                "fra1", AssignmentAction.start, no_model, spec(dataset, base_model="no-such-model")
            )
        )
        misrouted = assignment("osl1", AssignmentAction.start, uuid4(), spec(dataset)).model_dump(
            mode="json"
        )
        await bus.js.publish(
            subjects.assignments("fra1"), as_json(misrouted), stream=settings.stream_name
        )

        good = uuid4()
        await bus.assign(assignment("fra1", AssignmentAction.start, good, spec(dataset), gpus=2))

        failed = await bus.wait_for(RunFailed, UUID(bad_config["job_id"]))
        assert failed.reason == FailureReason.invalid_config and "rank" in failed.message
        assert (await bus.wait_for(RunFailed, no_data)).reason == FailureReason.dataset_missing
        assert (await bus.wait_for(RunFailed, no_model)).reason == FailureReason.unknown_base_model
        wrong_dc = await bus.wait_for(ErrorEvent, code="wrong_datacenter")
        assert wrong_dc.correlation_id == misrouted["job_id"]

        completed = await bus.wait_for(RunCompleted, good)
        assert completed.steps == 8 and completed.datacenter == "fra1"
        assert completed.adapter_key == f"{good}.tar"  # a key of bucket adapters
        assert await ObjectStore(bus.js).exists(ADAPTERS_BUCKET, f"{good}.tar")
        acc = completed.accounting
        assert acc.tokens_seen > 0 and acc.energy_wh > 0
        assert acc.hours and all(h.g_per_kwh == 300.0 and h.pue == 1.25 for h in acc.hours)
        assert acc.emissions_g == pytest.approx(acc.energy_wh / 1000 * 1.25 * 300.0)

        progress = bus.of(RunProgress, good)
        assert (
            progress[0].step == 0 and progress[0].estimated_remaining_gpu_hours > 0
        )  # the measured estimate
        assert progress[-1].step == 8 and progress[-1].val_loss is not None
        busy = [s for s in bus.events if isinstance(s, AgentStatus) and good in s.running_jobs]
        # the good job holds 2 GPUs; a bad one still loading its model holds its 1 until it fails
        assert busy and all(s.gpus_free == 16 - 2 - (len(s.running_jobs) - 1) for s in busy)
        assert any(s.running_jobs == [good] and s.gpus_free == 16 - 2 for s in busy)
        never_run = UUID(misrouted["job_id"])
        assert (
            not bus.of(RunProgress, never_run)
            and not bus.of(RunCompleted, never_run)
            and not bus.of(RunFailed, never_run)
        )


@pytest.mark.parametrize(
    ("gpus", "tolerance"),
    # on two devices (two gloo processes under torchrun) dropout draws other masks: the loss
    # agrees to run-to-run noise (see test_multi_device.NOISE), on one device to float precision
    [(1, 1e-5), (2, 0.02)],
    ids=["one-device", "two-devices"],
)
async def test_pause_on_one_agent_and_resume_on_another_continues_exactly(
    settings: AgentSettings, intents_binary: Path, gpus: int, tolerance: float
) -> None:
    fra1 = create_service("fra1", settings.model_copy(update=AGENT))
    osl1 = create_service("osl1", settings.model_copy(update=AGENT))
    async with Bus(settings) as bus, fra1.running(), osl1.running():
        dataset = await upload_dataset(settings, intents_binary)
        job = uuid4()
        await bus.assign(assignment("fra1", AssignmentAction.start, job, spec(dataset), gpus=gpus))
        await bus.wait_for(RunProgress, job, step=3)
        await bus.assign(assignment("fra1", AssignmentAction.pause, job, None))
        paused = await bus.wait_for(RunPaused, job)
        assert 3 <= paused.step < 8 and paused.datacenter == "fra1"

        await bus.assign(
            assignment(
                "osl1",
                AssignmentAction.resume,
                job,
                spec(dataset),
                checkpoint_key=paused.checkpoint_key,
                gpus=gpus,
            )
        )
        completed = await bus.wait_for(RunCompleted, job)
        assert completed.datacenter == "osl1" and completed.steps == 8
        resumed_steps = [p.step for p in bus.of(RunProgress, job) if p.datacenter == "osl1"]
        assert min(resumed_steps) == paused.step  # continued from the checkpoint, not from step 0
        assert {h.datacenter for h in completed.accounting.hours} == {"fra1", "osl1"}

    straight = await asyncio.to_thread(
        run_training, request_for(intents_binary, **CONFIG), site=FAST_SITE
    )
    assert completed.metrics.val_loss == pytest.approx(straight.evaluation.loss, abs=tolerance)
    assert completed.accounting.tokens_seen == straight.accounting.tokens_seen


async def test_a_killed_agent_is_resumed_from_its_last_checkpoint_by_redelivery(
    settings: AgentSettings, intents_binary: Path, tmp_path: Path
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")},
        "METATUNE_NATS_URL": settings.nats_url,
        "METATUNE_DATA_DIR": str(tmp_path / "killed"),
        "METATUNE_ACK_WAIT_S": str(settings.ack_wait_s),
        "METATUNE_AGENT_CHECKPOINT_EVERY": "2",
        "METATUNE_AGENT_PROGRESS_INTERVAL_S": "0",
        "METATUNE_AGENT_IDLE_SECONDS": "0.05",
    }
    async with Bus(settings) as bus:
        proc = subprocess.Popen(
            [sys.executable, "-m", "metatune_trainer_agent", "--datacenter", "fra1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await bus.wait_for(AgentStatus, datacenter="fra1", timeout_s=60)
            dataset = await upload_dataset(settings, intents_binary)
            job = uuid4()
            await bus.assign(assignment("fra1", AssignmentAction.start, job, spec(dataset)))
            await bus.wait_for(RunProgress, job, step=3)  # a checkpoint was written at step 2
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        assert await ObjectStore(bus.js).exists(CHECKPOINTS_BUCKET, str(job))
        before = bus.of(RunProgress, job)
        killed_at = max(p.step for p in before)

        service = create_service("fra1", settings.model_copy(update=AGENT))
        async with service.running():
            completed = await bus.wait_for(RunCompleted, job)
        restarted = bus.of(RunProgress, job)[len(before) :]
        assert completed.steps == 8
        assert (
            restarted and 2 <= restarted[0].step <= killed_at
        )  # from the last checkpoint, not from step 0


async def test_an_assignment_redelivered_after_its_run_ended_is_not_trained_again(
    settings: AgentSettings, intents_binary: Path
) -> None:
    """The bus went down as a run ended: its outcome went out on the retry, its acknowledgement
    did not, and JetStream hands the start back. Neither the agent that ran it nor that agent
    restarted (the ended assignments are kept in its data folder) trains the job a second time."""
    job = uuid4()
    async with Bus(settings) as bus:
        for restarted in (False, True):
            service = create_service("fra1", settings.model_copy(update=AGENT))
            async with service.running():
                if not restarted:
                    dataset = await upload_dataset(settings, intents_binary)
                    start = assignment("fra1", AssignmentAction.start, job, spec(dataset))
                    await bus.assign(start)
                    await bus.wait_for(RunCompleted, job)
                    await wait_for(partial(_ended, service.runtime, job), "the run ended")
                progress = len(bus.of(RunProgress, job))
                await bus.assign(start)  # the same assignment (event id) again
                # taken and acknowledged: a run it started would hold it until that run ended
                await wait_for(
                    lambda: _consumer_settled(bus, "trainer-agent-fra1"), "the copy taken"
                )
            assert len(bus.of(RunProgress, job)) == progress  # no step trained again
        assert len(bus.of(RunCompleted, job)) == 1 and not bus.of(RunFailed, job)


def _ended(agent: Any, job: UUID) -> bool:
    return job not in agent.jobs


async def _consumer_settled(bus: Bus, durable: str) -> bool:
    info = await bus.js.consumer_info(bus.settings.stream_name, durable)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def test_steps_between_progress_events_ride_on_the_next_and_a_pause_sends_the_rest(
    settings: AgentSettings, intents_binary: Path
) -> None:
    """With a long progress interval only evaluations (every 4th of 40 steps) are published; the
    steps between arrive as their points, and the steps after the last one when the run pauses:
    every step once, before the pause event."""
    quiet = {**AGENT, "agent_progress_interval_s": 3600.0, "agent_checkpoint_every": 1000}
    service = create_service("fra1", settings.model_copy(update=quiet))
    async with Bus(settings) as bus, service.running():
        dataset = await upload_dataset(settings, intents_binary)
        job = uuid4()
        start = assignment("fra1", AssignmentAction.start, job, spec(dataset))
        longer = LoraConfig(**{**CONFIG, "max_steps": 40})
        await bus.assign(start.model_copy(update={"config": longer}))
        await bus.wait_for(RunProgress, job, step=8)
        await bus.assign(assignment("fra1", AssignmentAction.pause, job, None))
        paused = await bus.wait_for(RunPaused, job)
        assert 8 <= paused.step < 40
        progress = bus.of(RunProgress, job)
        assert bus.events.index(progress[-1]) < bus.events.index(paused)
        own = [p.step for p in progress if p.step > 0]  # step 0: the estimate before training
        carried = [point.step for p in progress for point in p.points]
        assert sorted(own + carried) == list(range(1, paused.step + 1))
        assert any(p.points for p in progress) and len(progress) < paused.step
        points = [point for p in progress for point in p.points]
        assert all(point.train_loss is not None and point.tokens_seen > 0 for point in points)


async def test_an_agent_started_mid_hour_prices_from_its_region_s_kept_forecast(
    settings: AgentSettings,
) -> None:
    """A forecast the forecaster kept in KV before the agent started (none on the stream for it
    to consume): the agent reads it on start, so the hours it trains before the next round are
    priced; a restarted agent's durable consumer would otherwise have none until that round."""
    from metatune.bus import ensure_streams, forecasts

    start = floor_hour(datetime.now(UTC)) - timedelta(hours=1)
    values = [123.0] * 168
    kept = CarbonForecast(
        occurred_at=datetime.now(UTC),
        region="DE",
        issued_at=datetime.now(UTC),
        start=start,
        model_version="kept",
        g_per_kwh=values,
        p10_g_per_kwh=values,
        p90_g_per_kwh=values,
    )
    nc = await nats.connect(settings.nats_url)
    try:
        await ensure_streams(nc.jetstream(), settings)
        await forecasts.keep(nc.jetstream(), kept)
        service = create_service("fra1", settings.model_copy(update=AGENT))
        agent = service.runtime
        async with service.running():
            await wait_for(lambda: agent.intensity.forecast is not None, "the kept forecast read")
            assert agent.intensity(datetime.now(UTC)) == pytest.approx(123.0)
    finally:
        await nc.close()
