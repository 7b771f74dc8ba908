"""A datacenter's agent behind its leaf node: assignments from the hub's JetStream reach it through
the link, and its status, progress and completion reach the hub (a real MiniLM run of a few steps)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest

from metatune import subjects
from metatune.bus import ADAPTERS_BUCKET, DATASETS_BUCKET, ObjectStore, ensure_streams
from metatune.bus.auth import agent_user
from metatune.bus.connection import client_auth
from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    DatasetLocation,
    LoraConfig,
    RunCompleted,
    RunProgress,
)
from metatune.settings import Settings
from metatune_trainer_agent.adapters.run_results import adapter_key
from metatune_trainer_agent.app import create_service as create_agent
from tests.support.builders import job_request
from tests.support.waiting import received_on, wait_for

from .conftest import LeafSite, linked

pytestmark = pytest.mark.slow  # trains a job through the leaf node

STEPS = 4
CONFIG = {"batch_size": 8, "max_seq_length": 32, "learning_rate": 3e-3, "max_steps": STEPS}


async def test_a_job_runs_through_the_datacenter_s_leaf_node(
    leaf_site: LeafSite, tmp_path: Path, text_slice
) -> None:

    dataset = text_slice("intents_binary.jsonl.gz", 96, tmp_path / "intents.jsonl")
    settings = leaf_site.agent_settings(
        data_dir=tmp_path / "fra1",
        heartbeat_s=0.5,
        ack_wait_s=10.0,
        retry_backoff_s=0.2,
        agent_checkpoint_every=2,
        agent_progress_interval_s=0.0,
        agent_status_interval_s=0.5,
        agent_idle_seconds=0.05,
        agent_curve_stop=False,
    )
    hub = await nats.connect(leaf_site.hub_admin_url)
    try:
        js = hub.jetstream()
        await ensure_streams(js, Settings(nats_url=leaf_site.hub_admin_url))
        await ObjectStore(js).put_file(DATASETS_BUCKET, "studies/sst2.jsonl", dataset)
        request = job_request(
            DatasetLocation(kind="object", ref="studies/sst2.jsonl"), max_steps=STEPS
        )
        assignment = Assignment(
            occurred_at=datetime.now(UTC),
            job_id=request.job_id,
            study_id=request.study_id,
            datacenter="fra1",
            action=AssignmentAction.start,
            plan_version=1,
            spec=request.spec,
            config=LoraConfig(**CONFIG),
        )
        statuses = await received_on(hub, subjects.agent_status("fra1"), AgentStatus)
        progress = await received_on(
            hub, subjects.run_progress("fra1", request.job_id), RunProgress
        )
        completed = await received_on(hub, subjects.runs_completed("fra1"), RunCompleted)

        await linked(settings)
        service = create_agent("fra1", settings)
        async with service.running():
            await wait_for(lambda: statuses, timeout=60)  # the agent's heartbeat crossed the link
            await js.publish(
                subjects.assignments("fra1"),
                assignment.to_bytes(),
                headers={"Nats-Msg-Id": str(assignment.event_id)},
            )
            await wait_for(lambda: completed, timeout=240)

        (done,) = completed
        assert done.job_id == request.job_id and done.datacenter == "fra1" and done.steps == STEPS
        assert progress and progress[-1].step <= STEPS
        assert await ObjectStore(js).exists(
            ADAPTERS_BUCKET, adapter_key(request.job_id)
        )  # uploaded through the leaf
        info = await js.consumer_info(
            "METATUNE", "trainer-agent-fra1"
        )  # the durable lives in the hub
        assert info.num_ack_pending == 0 and info.num_pending == 0
    finally:
        await hub.close()


async def test_the_leaf_node_lets_in_only_its_datacenter_s_agent(leaf_site: LeafSite) -> None:
    other = Settings(
        nats_url=leaf_site.leaf, nats_nkey_file=leaf_site.secrets.seed_file(agent_user("osl1"))
    )
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            leaf_site.leaf,
            allow_reconnect=False,
            max_reconnect_attempts=1,
            connect_timeout=2,
            **client_auth(other),
        )
