"""Through real NATS and PostgreSQL: a decision a killed process wrote but did not publish (its
outbox) is published at the study's next event, once, and nothing is decided twice."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from metatune import subjects
from metatune.contracts import DatasetLocation, LoraConfig
from metatune.knowledge.records import RunStatus
from metatune.knowledge.store import KnowledgeStore
from metatune.settings import Settings
from metatune_recommender.adapters.loop_store import LoopRecord, LoopStore
from metatune_recommender.app import create_service
from metatune_recommender.domain.study_loop import FinishedTrial, StudyLoop, job_id_for
from tests.support.builders import job_request
from tests.support.samples import FEATURES, record_assignment
from tests.support.studies import acked_through, completion, requests_stored
from tests.support.waiting import wait_for

BUDGET = 5


async def test_an_unpublished_decision_is_published_once_at_the_next_event(
    settings: Settings, store: KnowledgeStore
) -> None:
    study = uuid.uuid4()
    template = job_request(DatasetLocation(kind="object", ref="studies/x.jsonl"), max_steps=8)
    spec = template.spec.model_copy(update={"trials": BUDGET})
    await store.save_profile(study, spec, FEATURES, profiled_at=datetime.now(UTC))
    jobs = [
        template.model_copy(
            update={
                "event_id": uuid.uuid4(),
                "job_id": job_id_for(study, i),
                "study_id": study,
                "trial_index": i,
                "spec": spec,
                "config": LoraConfig(rank=4 * (i + 1)),
            }
        )
        for i in range(4)
    ]
    # as a process killed after writing its decision (trial 3, for trial 0's completion) and
    # before publishing it left it
    first = FinishedTrial(
        str(jobs[0].job_id),
        jobs[0].config.model_dump(mode="json"),
        0.5,
        "accuracy",
        RunStatus.completed,
    )
    loop = StudyLoop(
        study_id=study,
        budget=BUDGET,
        requested={j.trial_index: j.config.model_dump(mode="json") for j in jobs},
        finished={first.run_id: first},
    )
    service = create_service(settings, store=store, load_seed_kb=False)
    async with service.running():
        records = LoopStore(lambda: service.js)
        await records.save(LoopRecord(loop=loop, requests=[jobs[3]]), None)
        await record_assignment(service.js, jobs[0].job_id, "fra1")
        ack = await service.js.publish(
            subjects.runs_completed("fra1"),
            completion(jobs[0], accuracy=0.5).to_bytes(),
            stream=settings.stream_name,
        )
        await wait_for(
            lambda: acked_through(
                service.js, settings.stream_name, "recommender-next-trial", ack.seq
            ),
            "the completion handled",
            timeout=120,
        )
        stored = await requests_stored(service.js, settings.stream_name)
        record, _ = await records.load(study)
    # the written decision went out, and the completion (redelivered: the decision was its own)
    # asked for nothing more
    assert stored == 1
    assert record is not None and not record.outbox
    assert record.loop == loop
