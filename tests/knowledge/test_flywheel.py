"""The flywheel through a real NATS and PostgreSQL: completions and failures become one row per job
(a redelivered event too), a profile that arrives later fills the rows, the study's best goes to KV."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from metatune import subjects
from metatune.bus import STUDIES_BUCKET, headers_for
from metatune.contracts import (
    CurvePoint,
    DatasetLocation,
    DatasetProfiled,
    FailureReason,
    Hardware,
    LoraConfig,
    RunAccounting,
    RunCompleted,
    RunFailed,
    RunMetrics,
    StudySpec,
    TaskType,
)
from metatune.knowledge import KbFileHeader, RunStatus, StudyBest, write_kb_file
from metatune.knowledge.store import KnowledgeStore
from metatune.service import Service
from metatune.settings import Settings
from metatune_recommender.adapters.flywheel import (
    DURABLE_COMPLETED,
    DURABLE_FAILED,
    DURABLE_PROFILES,
    load_seed,
    register_flywheel,
)
from tests.support.samples import record_assignment
from tests.support.waiting import wait_for

from .samples import FEATURES, run

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def spec(name: str = "snips_intents.jsonl") -> StudySpec:
    return StudySpec(
        dataset=DatasetLocation(kind="object", ref=f"studies/x/{name}"),
        task=TaskType.classification,
        base_model="all-MiniLM-L6-v2",
        label_column="label",
        deadline=NOW + timedelta(hours=24),
    )


def completion(
    study: uuid.UUID, job: uuid.UUID, accuracy: float, *, early: bool = False
) -> RunCompleted:
    return RunCompleted(
        occurred_at=NOW,
        job_id=job,
        study_id=study,
        datacenter="osl1",
        config=LoraConfig(rank=8, learning_rate=2e-3),
        metrics=RunMetrics(val_loss=0.4, accuracy=accuracy),
        steps=40 if early else 80,
        early_stopped=early,
        stop_reason="curve: cannot beat the study's best" if early else None,
        accounting=RunAccounting(
            tokens_seen=9000,
            tokens_with_padding=11000,
            energy_wh=2.5,
            emissions_g=0.1,
            gpu_hours=0.0,
            wall_seconds=60.0,
        ),
        base_model="all-MiniLM-L6-v2",
        task=TaskType.classification,
        planned_steps=80,
        curve=[
            CurvePoint(step=0, fraction=0.0, val_loss=0.7, metric=0.3),
            CurvePoint(step=40, fraction=0.5, val_loss=0.4, metric=accuracy),
        ],
        majority_baseline=0.31,
        hardware=Hardware(device="cpu", precision="fp32"),
    )


@pytest.fixture
async def flywheel(settings: Settings, store: KnowledgeStore):
    service = Service("recommender-flywheel-test", settings=settings)
    register_flywheel(service, store)
    async with service.running():
        yield service


async def publish(service: Service, subject: str, event, *, dedup: bool = True) -> int:
    """Publish into JetStream; ``dedup=False`` sends it without its Nats-Msg-Id, as a redelivery would
    arrive again (the stream keeps both copies). A run event's job is recorded as assigned
    where the event comes from first, as the scheduler does before an agent runs it."""
    if hasattr(event, "job_id") and hasattr(event, "datacenter"):
        await record_assignment(service.js, event.job_id, event.datacenter)
    headers = headers_for(event) if dedup else None
    ack = await service.js.publish(
        subject, event.to_bytes(), headers=headers, stream=service.settings.stream_name
    )
    return ack.seq


async def consumed(service: Service, durable: str, seq: int) -> None:
    """Wait until the durable consumer has acknowledged everything up to stream sequence ``seq``."""

    async def acked() -> bool:
        info = await service.js.consumer_info(service.settings.stream_name, durable)
        return info.ack_floor.stream_seq >= seq and info.num_ack_pending == 0

    await wait_for(acked, f"{durable} acknowledging up to {seq}")


async def rows_of(store: KnowledgeStore, study: uuid.UUID, n: int) -> None:
    async def stored() -> bool:
        return len(await store.study_runs(study)) >= n

    await wait_for(stored, f"{n} rows of study {study}")


async def test_a_completion_becomes_one_row_even_when_redelivered(
    flywheel: Service, store: KnowledgeStore
) -> None:
    study, job = uuid.uuid4(), uuid.uuid4()
    profiled = await publish(
        flywheel,
        subjects.DATASETS_PROFILED,
        DatasetProfiled(occurred_at=NOW, study_id=study, spec=spec(), features=FEATURES),
    )
    event = completion(study, job, 0.9)
    await publish(flywheel, subjects.runs_completed("osl1"), event)
    seq = await publish(
        flywheel, subjects.runs_completed("osl1"), event, dedup=False
    )  # the same completion again
    await consumed(flywheel, DURABLE_COMPLETED, seq)
    # the profile has its own consumer: whichever lands first, the row ends up with the profile
    await consumed(flywheel, DURABLE_PROFILES, profiled)
    rows = await store.study_runs(study)
    assert [r.run_id for r in rows] == [str(job)]
    row = rows[0]
    assert row.provenance.source == "platform" and row.status is RunStatus.completed
    assert (row.metric_name, row.metric, row.majority_baseline, row.planned_steps) == (
        "accuracy",
        0.9,
        0.31,
        80,
    )
    assert (
        row.dataset.name == "snips_intents"
        and row.dataset.features == FEATURES
        and not row.profile_missing
    )
    assert (
        row.curve == event.curve
        and row.hardware == event.hardware
        and row.config["learning_rate"] == 2e-3
    )
    kv = await flywheel.js.key_value(STUDIES_BUCKET)
    best = StudyBest.model_validate_json((await kv.get(str(study))).value)
    assert (best.best, best.job_id, best.completed, best.metric_name) == (0.9, job, 1, "accuracy")


async def test_early_stopped_and_failed_runs_are_flagged(
    flywheel: Service, store: KnowledgeStore
) -> None:
    study, first, stopped, failed = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await publish(
        flywheel,
        subjects.DATASETS_PROFILED,
        DatasetProfiled(occurred_at=NOW, study_id=study, spec=spec(), features=FEATURES),
    )
    await publish(flywheel, subjects.runs_completed("osl1"), completion(study, first, 0.8))
    seq = await publish(
        flywheel, subjects.runs_completed("osl1"), completion(study, stopped, 0.5, early=True)
    )
    await publish(
        flywheel,
        subjects.runs_failed("fra1"),
        RunFailed(
            occurred_at=NOW,
            job_id=failed,
            study_id=study,
            datacenter="fra1",
            reason=FailureReason.out_of_memory,
            message="CUDA out of memory",
            config=LoraConfig(rank=64),
            base_model="all-MiniLM-L6-v2",
            task=TaskType.classification,
        ),
    )
    await consumed(flywheel, DURABLE_COMPLETED, seq)
    await rows_of(store, study, 3)
    rows = {r.run_id: r for r in await store.study_runs(study)}
    assert rows[str(stopped)].status is RunStatus.early_stopped and rows[
        str(stopped)
    ].stop_reason.startswith("curve")
    assert (
        rows[str(failed)].status is RunStatus.failed
        and "out_of_memory" in rows[str(failed)].stop_reason
    )
    assert rows[str(failed)].config["rank"] == 64 and rows[str(failed)].metric is None
    kv = await flywheel.js.key_value(STUDIES_BUCKET)
    best = StudyBest.model_validate_json((await kv.get(str(study))).value)
    assert (best.best, best.job_id, best.completed) == (0.8, first, 2)


async def test_a_completion_before_its_profile_is_filled_when_the_profile_arrives(
    flywheel: Service,
    store: KnowledgeStore,
) -> None:
    study, job = uuid.uuid4(), uuid.uuid4()
    event = completion(study, job, 0.7).model_copy(
        update={"base_model": None, "task": None}
    )  # an older agent
    seq = await publish(flywheel, subjects.runs_completed("osl1"), event)
    await consumed(flywheel, DURABLE_COMPLETED, seq)
    waiting = await store.run(str(job))
    assert (
        waiting.profile_missing
        and waiting.dataset.features is None
        and waiting.base_model == "unknown"
    )
    await publish(
        flywheel,
        subjects.DATASETS_PROFILED,
        DatasetProfiled(
            occurred_at=NOW, study_id=study, spec=spec("banking77.csv"), features=FEATURES
        ),
    )

    async def filled_in() -> bool:
        return not (await store.run(str(job))).profile_missing

    await wait_for(filled_in, "the profile filling the run")
    filled = await store.run(str(job))
    assert filled.dataset.features == FEATURES
    assert (filled.dataset.name, filled.base_model, filled.task) == (
        "banking77",
        "all-MiniLM-L6-v2",
        "classification",
    )
    assert len(await store.study_runs(study)) == 1


async def test_seed_loads_once(store: KnowledgeStore, tmp_path: Path) -> None:
    seed = tmp_path / "seed_kb.jsonl"
    write_kb_file(seed, KbFileHeader(), [run("seed-kb:a"), run("seed-kb:b")])
    assert (await load_seed(store, seed)).added == 2
    assert (await load_seed(store, seed)).added == 0
    assert len(await store.runs(source="seed-kb")) == 2
    bad = tmp_path / "other.jsonl"
    bad.write_text('{"kind": "metatune-knowledge-base", "schema_version": 0}\n')
    assert await load_seed(store, bad) is None  # logged, and the service goes on


async def test_only_runs_of_the_profiled_dataset_enter_the_knowledge_base(
    flywheel: Service, store: KnowledgeStore
) -> None:
    """A completion whose dataset digest is not the profiled one (however it got past its agent)
    and a run that failed on a swapped dataset are no rows; a run of the profiled data is one."""
    study, swapped, refused, genuine = (uuid.uuid4() for _ in range(4))
    profiled_spec = spec()
    profiled_spec = profiled_spec.model_copy(
        update={"dataset": profiled_spec.dataset.model_copy(update={"sha256": "a" * 64})}
    )
    profiled = await publish(
        flywheel,
        subjects.DATASETS_PROFILED,
        DatasetProfiled(occurred_at=NOW, study_id=study, spec=profiled_spec, features=FEATURES),
    )
    await consumed(flywheel, DURABLE_PROFILES, profiled)
    poisoned = completion(study, swapped, 0.99).model_copy(update={"dataset_sha256": "b" * 64})
    await publish(flywheel, subjects.runs_completed("osl1"), poisoned)
    failed = await publish(
        flywheel,
        subjects.runs_failed("osl1"),
        RunFailed(
            occurred_at=NOW,
            job_id=refused,
            study_id=study,
            datacenter="osl1",
            reason=FailureReason.dataset_digest_mismatch,
            message="dataset digest mismatch: ...",
        ),
    )
    honest = completion(study, genuine, 0.8).model_copy(update={"dataset_sha256": "a" * 64})
    seq = await publish(flywheel, subjects.runs_completed("osl1"), honest)
    await consumed(flywheel, DURABLE_COMPLETED, seq)
    await consumed(flywheel, DURABLE_FAILED, failed)
    assert [r.run_id for r in await store.study_runs(study)] == [str(genuine)]
    kv = await flywheel.js.key_value(STUDIES_BUCKET)
    best = StudyBest.model_validate_json((await kv.get(str(study))).value)
    assert (best.best, best.job_id) == (0.8, genuine)
