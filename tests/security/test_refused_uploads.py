"""A submission the profiler refuses leaves nothing in the datasets bucket, on a real nats-server with
auth on: the submitter (its own user) removes its own upload, an accepted one stays, and no user
gained a right to delete for it (the profiler still only reads the bucket; the submitter still
deletes in no other bucket)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nats.js.errors import NotFoundError

from metatune import subjects
from metatune.bus import CHECKPOINTS_BUCKET, DATASETS_BUCKET, ObjectStore
from metatune.contracts import (
    DatasetLocation,
    DatasetValidation,
    DatasetValidationReply,
    StudySpec,
    TaskType,
)
from metatune_cli.client import AsyncClient, InvalidRequest
from metatune_profiler.app import create_service
from metatune_profiler.settings import ProfilerSettings
from tests.support.requests import answer
from tests.support.secured_bus import REFUSED, SecuredBus, violation
from tests.support.waiting import wait_for

ROWS = [{"text": f"row {i}", "label": str(i % 2)} for i in range(20)]


async def stored(admin, bucket: str) -> tuple[list[str], int]:
    """The live objects of ``bucket`` by name, and how many chunk messages the bucket holds (a
    deleted object's chunks are purged, so a leftover chunk would count)."""
    js = admin.jetstream()
    info = await js.stream_info(f"OBJ_{bucket}", subjects_filter=f"$O.{bucket}.C.>")
    chunks = sum((info.state.subjects or {}).values())
    store = await js.object_store(bucket)
    try:
        names = sorted(o.name for o in await store.list(ignore_deletes=True) if not o.deleted)
    except NotFoundError:  # nats-py lists a bucket without a live object as not found
        names = []
    return names, chunks


async def test_a_refused_upload_is_removed_and_an_accepted_one_stays(
    secured: SecuredBus, admin, tmp_path: Path
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    profiler = create_service(
        secured.settings(
            "profiler", ProfilerSettings, data_dir=tmp_path / "data", dataset_roots=[tmp_path]
        )
    )
    async with profiler.running(), AsyncClient(secured.settings("submitter")) as client:
        probe = StudySpec(
            task=TaskType.classification,
            dataset=DatasetLocation(kind="path", ref=str(data)),
            base_model="all-MiniLM-L6-v2",
            deadline=datetime.now(UTC) + timedelta(days=1),
        )
        await answer(
            admin, subjects.DATASETS_VALIDATE, DatasetValidation(spec=probe), DatasetValidationReply
        )  # the profiler answers
        with pytest.raises(InvalidRequest, match="label column 'nope' is not in the dataset"):
            await client.submit(data, label_column="nope")
        assert await stored(admin, DATASETS_BUCKET) == ([], 0)  # neither its meta nor a chunk

        receipt = await client.submit(data, label_column="label")
        assert receipt.validation == "passed"
        names, chunks = await stored(admin, DATASETS_BUCKET)
        assert names == [receipt.dataset.ref] and chunks == 1
        assert (await ObjectStore(admin.jetstream()).stat(DATASETS_BUCKET, names[0]))[0] == (
            data.stat().st_size
        )
        # refused against a dataset already in the bucket: not this call's upload, so it stays
        with pytest.raises(InvalidRequest, match="label column 'nope'"):
            await client.submit(object_key=receipt.dataset.ref, label_column="nope")
        assert await stored(admin, DATASETS_BUCKET) == (names, chunks)


async def test_no_one_gains_a_right_to_delete(secured: SecuredBus, admin) -> None:
    """The profiler, which checks uploads, still cannot delete one (neither a delete marker on an
    object's meta nor a purge of the bucket), and the submitter deletes its uploads only: not a
    checkpoint."""
    objects = ObjectStore(admin.jetstream())
    await objects.put_bytes(DATASETS_BUCKET, "studies/s1/data.jsonl", b'{"text": "a"}\n')
    await objects.put_bytes(CHECKPOINTS_BUCKET, "job-1", b"weights")
    errors: list[Exception] = []
    async with secured.client("profiler", errors) as nc:
        store = await nc.jetstream(timeout=1.0).object_store(DATASETS_BUCKET)
        with pytest.raises(REFUSED):
            await store.delete("studies/s1/data.jsonl")
        await wait_for(violation(errors, "$O.datasets.M."), timeout=5)
        with pytest.raises(REFUSED):
            await nc.jetstream(timeout=1.0).purge_stream(f"OBJ_{DATASETS_BUCKET}")
        await wait_for(violation(errors, f"$JS.API.STREAM.PURGE.OBJ_{DATASETS_BUCKET}"), timeout=5)
    async with secured.client("submitter", errors) as nc:
        with pytest.raises(REFUSED):  # it may not even look at the bucket
            await nc.jetstream(timeout=1.0).object_store(CHECKPOINTS_BUCKET)
        with pytest.raises(REFUSED):  # nor delete the checkpoint's meta
            await nc.jetstream(timeout=1.0).publish("$O.checkpoints.M.am9iLTE=", b"{}")
        with pytest.raises(REFUSED):
            await nc.jetstream(timeout=1.0).purge_stream(f"OBJ_{CHECKPOINTS_BUCKET}")
        await wait_for(
            violation(errors, f"$JS.API.STREAM.PURGE.OBJ_{CHECKPOINTS_BUCKET}"), timeout=5
        )
    assert await objects.exists(DATASETS_BUCKET, "studies/s1/data.jsonl")
    assert await objects.get_bytes(CHECKPOINTS_BUCKET, "job-1") == b"weights"
