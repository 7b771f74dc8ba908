"""Through real NATS and PostgreSQL: a cancelled study stops (one StudyStopped, reason cancelled)
and requests nothing more, whether it was cancelled mid-study or before its profile arrived."""

from __future__ import annotations

import uuid

from metatune import subjects
from metatune.contracts import (
    Event,
    StopReason,
    StudyCancelled,
    StudyStopped,
)
from metatune.knowledge.store import KnowledgeStore
from metatune.service import Service
from metatune.settings import Settings
from metatune_recommender.adapters.loop_store import LoopStore
from metatune_recommender.app import create_service
from tests.support.builders import profiled
from tests.support.samples import NOW, SPEC, record_assignment
from tests.support.studies import acked_through, completion, requests_and_stops, requests_stored
from tests.support.waiting import received_on, wait_for


async def handled(service: Service, subject: str, event: Event, durable: str) -> None:
    """Publish ``event`` on ``subject`` and wait until the recommender's ``durable`` acked it."""
    stream = service.settings.stream_name
    ack = await service.js.publish(subject, event.to_bytes(), stream=stream)
    await wait_for(
        lambda: acked_through(service.js, stream, durable, ack.seq),
        f"{subject} handled by {durable}",
        timeout=120,
    )


async def stops_stored(service: Service) -> int:
    info = await service.js.stream_info(
        service.settings.stream_name, subjects_filter=subjects.STUDIES_STOPPED
    )
    return (info.state.subjects or {}).get(subjects.STUDIES_STOPPED, 0)


def cancellation(study: uuid.UUID) -> StudyCancelled:
    return StudyCancelled(occurred_at=NOW, study_id=study, reason="not needed")


async def test_a_study_cancelled_mid_way_requests_nothing_when_a_trial_finishes(
    settings: Settings, store: KnowledgeStore
) -> None:
    study = uuid.uuid4()
    spec = SPEC.model_copy(update={"trials": 5})
    service = create_service(settings, store=store, load_seed_kb=False)
    async with service.running():
        nc = service.broker.connection
        requests, stopped = await requests_and_stops(nc)
        profile = profiled(study, spec)
        await handled(service, subjects.DATASETS_PROFILED, profile, "recommender")
        await wait_for(lambda: store.profile(study), "the profile stored", timeout=120)
        assert await requests_stored(service.js, settings.stream_name) == 3
        await wait_for(lambda: len(requests) >= 3, "the opening batch received", timeout=30)

        await handled(
            service, subjects.STUDIES_CANCELLED, cancellation(study), "recommender-cancelled"
        )
        # a second cancellation (another event) stops nothing twice
        await handled(
            service, subjects.STUDIES_CANCELLED, cancellation(study), "recommender-cancelled"
        )
        first = next(r for r in requests if r.trial_index == 0)
        await record_assignment(service.js, first.job_id, "fra1")
        await handled(
            service,
            subjects.runs_completed("fra1"),
            completion(first, accuracy=0.5),
            "recommender-next-trial",
        )
        await wait_for(lambda: stopped, "the study's stop received", timeout=30)
        assert await requests_stored(service.js, settings.stream_name) == 3  # nothing more
        assert await stops_stored(service) == 1
        record, _ = await LoopStore(lambda: service.js).load(study)
    assert len(requests) == 3
    [stop] = stopped
    assert (stop.study_id, stop.reason, stop.trials_requested) == (study, StopReason.cancelled, 3)
    assert record is not None and not record.outbox
    assert record.loop.stopped is StopReason.cancelled and record.loop.requested == {}


async def test_a_study_cancelled_before_its_profile_requests_nothing(
    settings: Settings, store: KnowledgeStore
) -> None:
    study = uuid.uuid4()
    service = create_service(settings, store=store, load_seed_kb=False)
    async with service.running():
        nc = service.broker.connection
        stopped = await received_on(nc, subjects.STUDIES_STOPPED, StudyStopped)
        await handled(
            service, subjects.STUDIES_CANCELLED, cancellation(study), "recommender-cancelled"
        )
        profile = profiled(study)
        await handled(service, subjects.DATASETS_PROFILED, profile, "recommender")
        await wait_for(lambda: stopped, "the study's stop received", timeout=30)
        assert await requests_stored(service.js, settings.stream_name) == 0
        assert await stops_stored(service) == 1
    [stop] = stopped
    assert (stop.reason, stop.trials_requested, stop.trials_finished) == (
        StopReason.cancelled,
        0,
        0,
    )
