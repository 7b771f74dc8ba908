"""``metatune.requests.knowledge.runs`` through real NATS and PostgreSQL: the recommender says how
many runs of each study asked its knowledge base holds, as the flywheel stored them from the bus
(a completion and a failure), and 0 for a study it has none of; asking stores nothing."""

from __future__ import annotations

import uuid

from metatune import subjects
from metatune.contracts import (
    FailureReason,
    KnowledgeRuns,
    KnowledgeRunsReply,
    RunCompleted,
    RunFailed,
    RunMetrics,
)
from metatune.knowledge.store import KnowledgeStore
from metatune.settings import Settings
from metatune_recommender.adapters.flywheel import DURABLE_COMPLETED, DURABLE_FAILED
from metatune_recommender.app import create_service
from tests.support.requests import answer
from tests.support.samples import ACCOUNTING, CONFIG, NOW, SPEC, record_assignment
from tests.support.studies import acked_through
from tests.support.waiting import wait_for


async def test_the_recommender_counts_a_studys_runs_in_its_knowledge_base(
    settings: Settings, store: KnowledgeStore
) -> None:
    study, other, never = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    done, failed, elsewhere = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    service = create_service(settings, store=store, load_seed_kb=False)
    async with service.running():
        js, stream = service.js, settings.stream_name
        nc = service.broker.connection
        ask = KnowledgeRuns(study_ids=[study, other, never])
        before = await answer(nc, subjects.KNOWLEDGE_RUNS, ask, KnowledgeRunsReply)
        assert before.runs == {study: 0, other: 0, never: 0}
        for job in (done, failed, elsewhere):
            await record_assignment(js, job, "fra1")
        common = {"datacenter": "fra1", "config": CONFIG, "base_model": SPEC.base_model}
        events = [
            (
                subjects.runs_completed("fra1"),
                RunCompleted(
                    occurred_at=NOW,
                    job_id=done,
                    study_id=study,
                    metrics=RunMetrics(val_loss=0.9, accuracy=0.7),
                    steps=64,
                    accounting=ACCOUNTING,
                    task=SPEC.task,
                    **common,
                ),
                DURABLE_COMPLETED,
            ),
            (
                subjects.runs_failed("fra1"),
                RunFailed(
                    occurred_at=NOW,
                    job_id=failed,
                    study_id=study,
                    reason=FailureReason.out_of_memory,
                    message="OOM",
                    task=SPEC.task,
                    **common,
                ),
                DURABLE_FAILED,
            ),
            (
                subjects.runs_completed("fra1"),
                RunCompleted(
                    occurred_at=NOW,
                    job_id=elsewhere,
                    study_id=other,
                    metrics=RunMetrics(val_loss=0.8, accuracy=0.6),
                    steps=64,
                    accounting=ACCOUNTING,
                    task=SPEC.task,
                    **common,
                ),
                DURABLE_COMPLETED,
            ),
        ]
        for subject, event, durable in events:
            ack = await js.publish(subject, event.to_bytes(), stream=stream)
            await wait_for(
                lambda durable=durable, seq=ack.seq: acked_through(js, stream, durable, seq),
                f"{subject} stored by {durable}",
                timeout=120,
            )
        after = await answer(nc, subjects.KNOWLEDGE_RUNS, ask, KnowledgeRunsReply)
        stored = await js.stream_info(stream, subjects_filter=">")
    # the flywheel's rows, failed ones too; nothing for a study it never saw
    assert after.runs == {study: 2, other: 1, never: 0}
    assert len(await store.study_runs(study)) == 2
    assert stored.state.subjects and subjects.KNOWLEDGE_RUNS not in stored.state.subjects
