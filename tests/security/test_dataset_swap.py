"""A dataset replaced in the object store after its submission is neither profiled nor trained, on a
real nats-server with auth on. The submitter's credential may write the datasets bucket, so an
attacker holding it can put another file over a pending study's object; the submission's sha256
still names the genuine file, and the profiler and the agent compare what they fetch with it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from nats.aio.msg import Msg

from metatune import subjects
from metatune.bus import DATASETS_BUCKET, ObjectStore
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    DatasetProfiled,
    DatasetSubmitted,
    ErrorEvent,
    Event,
    FailureReason,
    LoraConfig,
    RunCompleted,
    RunFailed,
    RunProgress,
)
from metatune.integrity import sha256_of
from metatune_cli.client import AsyncClient
from metatune_profiler.app import create_service as create_profiler
from metatune_profiler.settings import ProfilerSettings
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.secured_bus import FRA1, SecuredBus
from tests.support.waiting import wait_for

ROWS = [{"text": f"an example sentence number {i}", "label": str(i % 2)} for i in range(40)]


def rows_file(path: Path, flip: bool = False) -> Path:
    """The genuine rows, or the poisoned ones (every label flipped)."""
    rows = [{**row, "label": str(1 - int(row["label"]))} if flip else row for row in ROWS]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


async def test_a_dataset_swapped_after_submission_is_neither_profiled_nor_trained(
    secured: SecuredBus, admin, tmp_path: Path
) -> None:
    seen: list[object] = []

    async def record(msg: Msg) -> None:
        kinds: dict[str, type[Event]] = {
            subjects.DATASETS_SUBMITTED: DatasetSubmitted,
            subjects.DATASETS_PROFILED: DatasetProfiled,
            subjects.runs_completed("fra1"): RunCompleted,
            subjects.runs_failed("fra1"): RunFailed,
        }
        kind = kinds.get(msg.subject)
        if kind is None and msg.subject.startswith("metatune.errors."):
            kind = ErrorEvent
        if kind is None and msg.subject.endswith(".progress"):
            kind = RunProgress
        if kind is not None:
            seen.append(kind.model_validate_json(msg.data))

    await admin.subscribe("metatune.>", cb=record)
    genuine = rows_file(tmp_path / "reviews.jsonl")
    async with AsyncClient(secured.settings("submitter")) as client:
        receipt = await client.submit(genuine, label_column="label")  # no profiler yet: unchecked
    assert receipt.dataset.sha256 == sha256_of(genuine)

    # the attacker, with the same submitter credential, replaces the pending study's object
    async with secured.client("submitter") as attacker:
        poisoned = rows_file(tmp_path / "poisoned.jsonl", flip=True)
        await ObjectStore(attacker.jetstream()).put_file(
            DATASETS_BUCKET, receipt.dataset.ref, poisoned
        )

    submitted = next(e for e in seen if isinstance(e, DatasetSubmitted))
    job = uuid4()
    start = Assignment(  # what the scheduler would send once the study was profiled
        occurred_at=datetime.now(UTC),
        job_id=job,
        study_id=submitted.study_id,
        datacenter="fra1",
        action=AssignmentAction.start,
        plan_version=1,
        spec=submitted.spec,
        config=LoraConfig(batch_size=8, max_seq_length=32, max_steps=4),
    )
    profiler = create_profiler(
        secured.settings("profiler", ProfilerSettings, data_dir=tmp_path / "profiler")
    )
    agent = create_agent("fra1", secured.settings(FRA1, AgentSettings, data_dir=tmp_path / "agent"))
    async with profiler.running(), agent.running():
        await admin.jetstream().publish(subjects.assignments("fra1"), start.to_bytes())

        def refused(service: str) -> ErrorEvent | None:
            return next(
                (
                    e
                    for e in seen
                    if isinstance(e, ErrorEvent)
                    and e.service == service
                    and e.code == "dataset_digest_mismatch"
                ),
                None,
            )

        def failed() -> RunFailed | None:
            return next((e for e in seen if isinstance(e, RunFailed) and e.job_id == job), None)

        profiler_error = await wait_for(lambda: refused("profiler"), "the profiler refusing")
        failure = await wait_for(failed, "the agent failing the job")
    assert failure is not None and profiler_error is not None
    assert failure.reason is FailureReason.dataset_digest_mismatch
    for message in (failure.message, profiler_error.message):
        assert "\n" not in message and "digest mismatch" in message
        assert sha256_of(genuine) in message and sha256_of(poisoned) in message
    assert not [e for e in seen if isinstance(e, DatasetProfiled | RunCompleted | RunProgress)]
    cached = list((tmp_path / "agent").rglob("*.jsonl*"))
    assert cached == []  # the poisoned file is not kept for a later trial
