"""metatune.requests.datasets.validate through a real NATS and the profiler in-process: a
submission whose columns or file the profiler would refuse is refused before it is published,
each problem one line naming its field; a good one goes through."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest

from metatune import subjects
from metatune.contracts import (
    DatasetLocation,
    DatasetValidation,
    DatasetValidationReply,
    StudySpec,
    TaskType,
)
from metatune.settings import Settings
from metatune_cli.client import AsyncClient, InvalidRequest
from metatune_profiler.app import create_service
from tests.support.requests import answer

from .conftest import write_jsonl

ROWS = [{"text": f"row {i}", "label": str(i % 2)} for i in range(20)]


def spec_of(data: Path, format: str | None = None, **options: str) -> StudySpec:
    return StudySpec(
        task=TaskType.classification,
        dataset=DatasetLocation(kind="path", ref=str(data), format=format),
        base_model="all-MiniLM-L6-v2",
        deadline=datetime.now(UTC) + timedelta(days=1),
        **options,
    )


async def submitted_count(js) -> int:
    info = await js.stream_info("METATUNE", subjects_filter=subjects.DATASETS_SUBMITTED)
    return sum((info.state.subjects or {}).values())


async def test_a_bad_label_column_is_refused_before_anything_is_published(
    private_nats: str, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    service = create_service(
        Settings(nats_url=private_nats, data_dir=tmp_path / "data", dataset_roots=[tmp_path])
    )
    nc = await nats.connect(private_nats)
    errors: list[bytes] = []

    async def on_error(msg) -> None:
        errors.append(msg.data)

    await nc.subscribe(subjects.errors("profiler"), cb=on_error)
    try:
        async with service.running(), AsyncClient(Settings(nats_url=private_nats)) as client:
            probe = DatasetValidation(spec=spec_of(data))
            await answer(nc, subjects.DATASETS_VALIDATE, probe, DatasetValidationReply)
            with pytest.raises(InvalidRequest) as refused:
                await client.submit(data, label_column="nope")
            assert str(refused.value) == (
                "label_column: label column 'nope' is not in the dataset (columns: text, label)"
            )
            assert await submitted_count(nc.jetstream()) == 0  # nothing published
            receipt = await client.submit(data, label_column="label")
            assert await submitted_count(nc.jetstream()) == 1
            assert receipt.dataset.kind == "object"
    finally:
        await nc.close()
    assert errors == []  # refused by the reply alone: no error event


@pytest.mark.parametrize(
    ("content", "options", "problem"),
    [
        (
            b'{"words": "x", "label": "a"}\n',
            {},
            "text_column: no text column: found words, label;",
        ),
        (b'{"text": "x", "label": "a"}\n', {"text_column": "t"}, "text_column: text column 't'"),
        (b"PAR1 not really parquet", {"format": "parquet"}, "dataset: "),
    ],
)
async def test_each_problem_names_its_field(
    private_nats: str, tmp_path: Path, content: bytes, options: dict, problem: str
) -> None:
    data = tmp_path / "d.data"
    data.write_bytes(content)
    spec = spec_of(data, **options)
    service = create_service(
        Settings(nats_url=private_nats, data_dir=tmp_path / "data", dataset_roots=[tmp_path])
    )
    nc = await nats.connect(private_nats)
    try:
        async with service.running():
            reply = await answer(
                nc, subjects.DATASETS_VALIDATE, DatasetValidation(spec=spec), DatasetValidationReply
            )
    finally:
        await nc.close()
    [line] = reply.problems
    assert line.startswith(problem) and "\n" not in line
