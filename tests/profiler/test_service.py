"""The profiler service over a real nats-server: submissions in, profiles or typed errors out."""

from __future__ import annotations

import gzip
import http.server
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from uuid import UUID, uuid4

import nats
import pytest

from metatune import subjects
from metatune.bus import DATASETS_BUCKET
from metatune.contracts import (
    DatasetLocation,
    DatasetProfiled,
    DatasetSubmitted,
    ErrorEvent,
    StudySpec,
    TaskType,
)
from metatune_profiler.app import create_service
from metatune_profiler.settings import ProfilerSettings
from tests.support.waiting import wait_for

from .conftest import write_jsonl

MAX_ROW_BYTES = 2_000
MAX_DATASET_BYTES = 200_000
GOOD = [
    {"text": f"review {i}: the film was {'great' if i % 2 else 'dull'}", "label": str(i % 2)}
    for i in range(80)
]


@pytest.fixture
def nats_url(private_nats: str) -> str:
    return private_nats


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "www"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Outcomes:
    """What came back per study id: profiles and error events."""

    def __init__(self) -> None:
        self.profiled: dict[UUID, DatasetProfiled] = {}
        self.errors: dict[str, list[ErrorEvent]] = {}

    async def on_profiled(self, msg) -> None:
        event = DatasetProfiled.model_validate_json(msg.data)
        self.profiled[event.study_id] = event

    async def on_error(self, msg) -> None:
        event = ErrorEvent.model_validate_json(msg.data)
        self.errors.setdefault(event.correlation_id or "", []).append(event)

    def codes(self, study_id: UUID) -> list[str]:
        return [e.code for e in self.errors.get(str(study_id), [])]


def submission(
    location: DatasetLocation,
    *,
    base_model: str = "all-MiniLM-L6-v2",
    task: TaskType = TaskType.classification,
) -> DatasetSubmitted:
    now = datetime.now(UTC)
    spec = StudySpec(
        dataset=location, task=task, base_model=base_model, deadline=now + timedelta(days=2)
    )
    return DatasetSubmitted(occurred_at=now, study_id=uuid4(), spec=spec)


@pytest.fixture
async def running(nats_url: str, tmp_path: Path) -> AsyncIterator[tuple[Outcomes, object]]:
    settings = ProfilerSettings(
        nats_url=nats_url,
        data_dir=tmp_path / "data",
        heartbeat_s=0.5,
        max_row_bytes=MAX_ROW_BYTES,
        max_dataset_bytes=MAX_DATASET_BYTES,
        dataset_roots=[tmp_path],
        allow_url_datasets=True,
        url_allowed_networks=["127.0.0.0/8"],
    )
    service = create_service(settings.model_copy(update={"profiler_sample_size": 64}))
    outcomes = Outcomes()
    nc = await nats.connect(nats_url)
    await nc.subscribe(subjects.DATASETS_PROFILED, cb=outcomes.on_profiled)
    await nc.subscribe(subjects.errors("profiler"), cb=outcomes.on_error)
    async with service.running():
        yield outcomes, (service, nc.jetstream())
    await nc.close()


async def test_object_path_and_url_submissions_are_profiled(
    running, tmp_path: Path, http_root
) -> None:
    outcomes, (service, js) = running
    data = write_jsonl(tmp_path / "good.jsonl", GOOD)
    await service.objects.put_file(DATASETS_BUCKET, "uploads/good.jsonl", data)
    root, base_url = http_root
    (root / "good.jsonl.gz").write_bytes(gzip.compress(data.read_bytes()))
    events = [
        submission(DatasetLocation(kind="object", ref="uploads/good.jsonl")),
        submission(DatasetLocation(kind="path", ref=str(data))),
        submission(DatasetLocation(kind="url", ref=f"{base_url}/good.jsonl.gz")),
    ]
    for event in events:
        await js.publish(subjects.DATASETS_SUBMITTED, event.to_bytes())
    await wait_for(lambda: all(e.study_id in outcomes.profiled for e in events))
    profiles = [outcomes.profiled[e.study_id] for e in events]
    assert all(p.features.n_examples == 80 and p.features.n_classes == 2 for p in profiles)
    assert all(p.rows_skipped == 0 and p.correlation_id == str(p.study_id) for p in profiles)
    assert profiles[0].features == profiles[1].features == profiles[2].features
    assert outcomes.errors == {}
    assert not any(
        (tmp_path / "data" / "profiler" / "downloads").iterdir()
    )  # downloads are cleaned up


async def test_each_bad_input_gets_its_error_event_and_the_service_keeps_serving(
    running, tmp_path: Path
) -> None:
    outcomes, (_, js) = running
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "latin1.jsonl").write_bytes(
        "".join(f'{{"text": "caf\u00e9 {i}", "label": "{i % 2}"}}\n' for i in range(10)).encode(
            "latin-1"
        )
    )
    (bad / "empty.jsonl").write_bytes(b"")
    write_jsonl(
        bad / "notext.jsonl", [{"body_text": "x", "label": "a"}, {"body_text": "y", "label": "b"}]
    )
    write_jsonl(bad / "oneclass.jsonl", [{"text": f"t {i}", "label": "only"} for i in range(10)])
    write_jsonl(bad / "bigrow.jsonl", [{"text": "w " * MAX_ROW_BYTES, "label": "a"}])
    (bad / "huge.jsonl").write_bytes(b'{"text": "a", "label": "b"}\n' * (MAX_DATASET_BYTES // 20))
    good = write_jsonl(bad / "good.jsonl", GOOD)

    cases = {
        "not_utf8": submission(DatasetLocation(kind="path", ref=str(bad / "latin1.jsonl"))),
        "empty_file": submission(DatasetLocation(kind="path", ref=str(bad / "empty.jsonl"))),
        "no_text_column": submission(DatasetLocation(kind="path", ref=str(bad / "notext.jsonl"))),
        "one_class_label": submission(
            DatasetLocation(kind="path", ref=str(bad / "oneclass.jsonl"))
        ),
        "row_too_large": submission(DatasetLocation(kind="path", ref=str(bad / "bigrow.jsonl"))),
        "file_too_large": submission(DatasetLocation(kind="path", ref=str(bad / "huge.jsonl"))),
        "unknown_base_model": submission(
            DatasetLocation(kind="path", ref=str(good)), base_model="no-such-model"
        ),
        "dataset_not_found": submission(DatasetLocation(kind="object", ref="uploads/missing.csv")),
    }
    for event in cases.values():
        await js.publish(subjects.DATASETS_SUBMITTED, event.to_bytes())
    after = submission(DatasetLocation(kind="path", ref=str(good)))
    await js.publish(subjects.DATASETS_SUBMITTED, after.to_bytes())

    await wait_for(
        lambda: (
            after.study_id in outcomes.profiled
            and all(outcomes.codes(e.study_id) for e in cases.values())
        )
    )
    for code, event in cases.items():
        assert outcomes.codes(event.study_id) == [code], code
        [error] = outcomes.errors[str(event.study_id)]
        assert error.service == "profiler" and error.kind == "bad_input" and error.message
        assert error.subject == subjects.DATASETS_SUBMITTED
        assert event.study_id not in outcomes.profiled
    assert outcomes.errors[str(cases["not_utf8"].study_id)][0].row == 1
    assert outcomes.errors[str(cases["row_too_large"].study_id)][0].row == 1


async def test_partially_bad_file_is_profiled_and_skips_are_reported(
    running, tmp_path: Path
) -> None:
    outcomes, (_, js) = running
    lines = [f'{{"text": "row {i} is fine", "label": "{i % 3}"}}\n'.encode() for i in range(50)]
    lines.insert(20, b"{not json}\n")
    lines.insert(30, '{"text": "na\u00efve", "label": "1"}\n'.encode("latin-1"))
    path = tmp_path / "partial.jsonl"
    path.write_bytes(b"".join(lines))
    event = submission(DatasetLocation(kind="path", ref=str(path)))
    await js.publish(subjects.DATASETS_SUBMITTED, event.to_bytes())
    await wait_for(
        lambda: event.study_id in outcomes.profiled and len(outcomes.codes(event.study_id)) == 2
    )
    profiled = outcomes.profiled[event.study_id]
    assert profiled.features.n_examples == 50 and profiled.features.n_classes == 3
    assert profiled.rows_skipped == 2 and profiled.skip_reasons == {
        "malformed_row": 1,
        "not_utf8": 1,
    }
    rows = {e.code: e.row for e in outcomes.errors[str(event.study_id)]}
    assert rows == {"malformed_row": 21, "not_utf8": 31}


async def test_a_long_profile_is_not_redelivered(nats_url: str, tmp_path: Path) -> None:
    """Profiling that outlasts ack_wait (150k rows: several seconds, against 1 s) keeps the message in
    progress instead of getting it redelivered."""
    settings = ProfilerSettings(
        nats_url=nats_url,
        data_dir=tmp_path / "data",
        heartbeat_s=0.5,
        ack_wait_s=1.0,
        dataset_roots=[tmp_path],
    )
    service = create_service(settings.model_copy(update={"profiler_sample_size": 64}))
    path = write_jsonl(
        tmp_path / "long.jsonl",
        (GOOD[i % len(GOOD)] | {"text": f"{i} " + GOOD[i % 80]["text"]} for i in range(150_000)),
    )
    outcomes = Outcomes()
    nc = await nats.connect(nats_url)
    await nc.subscribe(subjects.DATASETS_PROFILED, cb=outcomes.on_profiled)
    js = nc.jetstream()
    async with service.running():
        event = submission(DatasetLocation(kind="path", ref=str(path)))
        await js.publish(subjects.DATASETS_SUBMITTED, event.to_bytes())

        # Once the service holds the submission, a second puller on the same durable consumer (as a
        # second replica would be) must not be handed it while the first is still profiling it.
        # (Before that, either puller may win the first delivery, which is not what is tested.)
        async def held_by_the_service() -> bool:
            info = await js.consumer_info(settings.stream_name, "profiler")
            return info.num_ack_pending == 1 and info.num_pending == 0

        await wait_for(held_by_the_service, "the service holding the submission")
        replica = await js.pull_subscribe_bind("profiler", stream=settings.stream_name)
        with pytest.raises(nats.errors.TimeoutError):
            await replica.fetch(1, timeout=3 * settings.ack_wait_s)
        await wait_for(lambda: event.study_id in outcomes.profiled)
        info = await js.consumer_info(settings.stream_name, "profiler")
        assert info.num_redelivered == 0 and info.num_ack_pending == 0
    await nc.close()


async def test_paths_outside_the_data_roots_and_non_public_urls_are_refused(
    running, tmp_path: Path
) -> None:
    outcomes, (_, js) = running
    (tmp_path / "link.jsonl").symlink_to("/etc/passwd")
    refused = [
        submission(
            DatasetLocation(
                kind="path", ref=str(tmp_path / "datasets" / ".." / ".." / ".." / "etc" / "passwd")
            )
        ),
        submission(DatasetLocation(kind="path", ref="/etc/passwd")),
        submission(DatasetLocation(kind="path", ref=str(tmp_path / "link.jsonl"))),
        submission(
            DatasetLocation(kind="url", ref="http://10.20.30.40/data.jsonl")
        ),  # refused before any connection
        submission(DatasetLocation(kind="url", ref="http://169.254.169.254/latest/meta-data")),
        submission(DatasetLocation(kind="url", ref="file:///etc/passwd")),
    ]
    for event in refused:
        await js.publish(subjects.DATASETS_SUBMITTED, event.to_bytes())
    await wait_for(lambda: all(outcomes.codes(e.study_id) for e in refused))
    for event in refused:
        assert outcomes.codes(event.study_id) == ["location_not_allowed"], event.spec.dataset.ref
        assert event.study_id not in outcomes.profiled
