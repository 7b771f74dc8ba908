"""A study's trials as the recommender's tests drive and read them: a requested trial's result as
the agent where it ran would report it, and what the recommender did, read from the stream itself
(not from a subscription) or as a subscriber receives it."""

from __future__ import annotations

from typing import Any

from nats.js.errors import NotFoundError

from metatune import subjects
from metatune.contracts import JobRequested, RunCompleted, RunMetrics, StudyStopped

from .samples import ACCOUNTING, NOW
from .waiting import received_on


def completion(job: JobRequested, accuracy: float, datacenter: str = "fra1") -> RunCompleted:
    """``job`` completed at ``datacenter`` with ``accuracy`` (64 steps, the samples' accounting)."""
    return RunCompleted(
        occurred_at=NOW,
        job_id=job.job_id,
        study_id=job.study_id,
        datacenter=datacenter,
        config=job.config,
        metrics=RunMetrics(val_loss=0.9, accuracy=accuracy),
        steps=64,
        accounting=ACCOUNTING,
        base_model=job.spec.base_model,
        task=job.spec.task,
    )


async def acked_through(js: Any, stream: str, durable: str, seq: int) -> bool:
    """Whether the durable consumer ``durable`` has acknowledged every message up to stream
    sequence ``seq`` (False while it does not exist yet)."""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        return False
    return info.ack_floor.stream_seq >= seq and info.num_ack_pending == 0


async def requests_stored(js: Any, stream: str) -> int:
    """How many job requests the stream holds (duplicates of one event id are stored once)."""
    info = await js.stream_info(stream, subjects_filter=subjects.JOBS_REQUESTED)
    return (info.state.subjects or {}).get(subjects.JOBS_REQUESTED, 0)


async def requests_and_stops(nc: Any) -> tuple[list[JobRequested], list[StudyStopped]]:
    """Subscribe ``nc`` to what the recommender publishes of a study: the two lists fill with its
    trial requests and its stops (wait on them with :func:`tests.support.waiting.wait_for`)."""
    requests = await received_on(nc, subjects.JOBS_REQUESTED, JobRequested)
    return requests, await received_on(nc, subjects.STUDIES_STOPPED, StudyStopped)
