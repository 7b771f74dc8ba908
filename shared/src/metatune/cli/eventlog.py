"""Reading the event log (stream ``METATUNE``) back as contracts, for commands that answer from it.

The log is the platform's only shared record, so ``study``, ``results`` and ``adapter`` read it
rather than any service's database. Each subject is replayed through its own ordered consumer
(the server filters, so forecasts are never downloaded) and the events are merged in stream order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from .. import subjects
from ..contracts import (
    DatasetProfiled,
    DatasetSubmitted,
    Event,
    JobCancelled,
    JobInfeasible,
    JobRequested,
    RunCompleted,
    RunFailed,
    StudyStopped,
)

STUDY_SUBJECTS: dict[str, type[Event]] = {
    subjects.DATASETS_SUBMITTED: DatasetSubmitted,
    subjects.DATASETS_PROFILED: DatasetProfiled,
    subjects.JOBS_REQUESTED: JobRequested,
    subjects.JOBS_CANCELLED: JobCancelled,
    subjects.JOBS_INFEASIBLE: JobInfeasible,
    subjects.STUDIES_STOPPED: StudyStopped,
    subjects.RUNS_COMPLETED_ALL: RunCompleted,
    subjects.RUNS_FAILED_ALL: RunFailed,
}
REPLY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Logged:
    seq: int
    subject: str
    event: Event


async def read_log(
    js: JetStreamContext, stream: str, wanted: dict[str, type[Event]] = STUDY_SUBJECTS
) -> list[Logged]:
    """Every valid event on ``wanted``'s subjects, oldest first (invalid ones were reported by the services)."""
    logged: list[Logged] = []
    for subject, contract in wanted.items():
        logged.extend(await _replay(js, stream, subject, contract))
    return sorted(logged, key=lambda item: item.seq)


async def _replay(
    js: JetStreamContext, stream: str, subject: str, contract: type[Event]
) -> Iterable[Logged]:
    # Counted up front: a consumer's num_pending drops as soon as the server pushes, before we read.
    info = await js.stream_info(stream, subjects_filter=subject)
    count = sum((info.state.subjects or {}).values())
    if not count:
        return []
    sub = await js.subscribe(
        subject,
        stream=stream,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
    )
    out: list[Logged] = []
    try:
        for _ in range(count):
            msg = await sub.next_msg(timeout=REPLY_TIMEOUT_S)
            try:
                out.append(
                    Logged(
                        msg.metadata.sequence.stream,
                        msg.subject,
                        contract.model_validate_json(msg.data),
                    )
                )
            except ValidationError:
                continue
    finally:
        await sub.unsubscribe()
    return out
