"""No peer can have a genuine run outcome dropped by publishing first under its ``Nats-Msg-Id``.

JetStream stores one message per id in its de-duplication window, whoever publishes it. Another
datacenter's agent, publishing under its own subject with the id the genuine agent was going to
use, used to make the stream drop the genuine completion as a copy. The agent now seals its run
outcomes' ids with a key only it holds (``metatune.msgids.sealed``), kept in its private data
folder: the same id for its own retries and restarts, none a peer can compute first."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

from metatune import msgids, subjects
from metatune.bus import DATASETS_BUCKET, ObjectStore, headers_for
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    DatasetLocation,
    Event,
    FailureReason,
    LoraConfig,
    RunCompleted,
    RunFailed,
    RunPaused,
    StudySpec,
    TaskType,
)
from metatune.integrity import sha256_of
from metatune_trainer_agent.adapters.run_ids import run_key
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.secured_bus import FRA1, OSL1, SecuredBus
from tests.support.waiting import wait_for

ROWS = [{"text": f"an example sentence number {i}", "label": str(i % 2)} for i in range(40)]


async def test_a_peer_publishing_first_under_the_predictable_ids_does_not_drop_the_genuine_completion(
    secured: SecuredBus, admin, tmp_path: Path
) -> None:
    js = admin.jetstream()
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    await ObjectStore(js).put_file(DATASETS_BUCKET, "studies/preempted.jsonl", rows)
    study, job = uuid4(), uuid4()
    start = Assignment(
        occurred_at=datetime.now(UTC),
        job_id=job,
        study_id=study,
        datacenter="osl1",
        action=AssignmentAction.start,
        plan_version=1,
        spec=StudySpec(
            dataset=DatasetLocation(
                kind="object", ref="studies/preempted.jsonl", sha256=sha256_of(rows)
            ),
            task=TaskType.classification,
            base_model="all-MiniLM-L6-v2",
            label_column="label",
            deadline=datetime.now(UTC) + timedelta(days=1),
        ),
        config=LoraConfig(batch_size=8, max_seq_length=32, max_steps=4),
    )

    # fra1's agent, under its own subjects, takes every id osl1's agent could once be expected to use
    async with secured.client(FRA1) as peer:
        peer_js = peer.jetstream(timeout=5.0)

        async def first(subject: str, event: Event, msg_id: str) -> None:
            headers = {**headers_for(event), "Nats-Msg-Id": msg_id}
            ack = await peer_js.publish(subject, event.to_bytes(), headers=headers)
            assert not ack.duplicate

        common = {"occurred_at": start.occurred_at, "job_id": job, "study_id": study}
        decoy = RunFailed(
            **common, datacenter="fra1", reason=FailureReason.internal, message="decoy"
        )
        await first(subjects.runs_failed("fra1"), decoy, f"completed-osl1-{job}")
        await first(subjects.runs_failed("fra1"), decoy, f"failed-{start.event_id}")
        paused = RunPaused(**common, datacenter="fra1", step=1, checkpoint_key="x")
        await first(subjects.runs_paused("fra1"), paused, f"paused-{start.event_id}")

    settings = secured.settings(OSL1, AgentSettings, data_dir=tmp_path / "agent")
    agent = create_agent("osl1", settings)
    async with agent.running():
        await js.publish(subjects.assignments("osl1"), start.to_bytes())

        async def stored() -> RunCompleted | None:
            info = await js.stream_info("METATUNE", subjects_filter=subjects.runs_completed("osl1"))
            if not info.state.subjects:
                return None
            msg = await js.get_last_msg("METATUNE", subjects.runs_completed("osl1"))
            return RunCompleted.model_validate_json(msg.data)

        completed = await wait_for(stored, "the genuine completion in the stream", timeout=240)
    assert completed is not None and (completed.job_id, completed.datacenter) == (job, "osl1")

    # the agent's key: kept owner-only with its data, the same when it restarts, so its own
    # retries and a restarted agent's re-publish still collapse into one message
    key_file = tmp_path / "agent" / "agent" / "run-ids.osl1.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = run_key(key_file.parent, "osl1")
    assert key == run_key(key_file.parent, "osl1") != run_key(key_file.parent, "fra1")
    stored_id = (await js.get_last_msg("METATUNE", subjects.runs_completed("osl1"))).headers
    assert stored_id is not None
    assert stored_id["Nats-Msg-Id"] == msgids.completed(key, job, "osl1")
