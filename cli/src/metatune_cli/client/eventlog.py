"""The event log (stream ``METATUNE``) read back as contracts: the platform's only shared record,
so the client answers from it rather than from any service's database.

Each subject is replayed through an ordered consumer of its own (the server filters: the hourly
forecasts are never downloaded unless asked for) and the events are merged in stream order.
"""

from __future__ import annotations

from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from metatune import catalog, subjects
from metatune.contracts import Event

# what a study is made of (metatune_cli.client.studies folds them); contracts from the catalog
STUDY_EVENTS: dict[str, type[Event]] = {
    subject: catalog.contract(subject)
    for subject in (
        subjects.DATASETS_SUBMITTED_ALL,
        subjects.DATASETS_PROFILED,
        subjects.JOBS_REQUESTED,
        subjects.ASSIGNMENTS_ALL,  # where each job runs: its run events count only from there
        subjects.JOBS_CANCELLED_ALL,
        subjects.JOBS_INFEASIBLE,
        subjects.STUDIES_STOPPED,
        subjects.RUNS_COMPLETED_ALL,
        subjects.RUNS_FAILED_ALL,
    )
}
NEXT_MESSAGE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class LoggedEvent:
    seq: int
    subject: str
    event: Event


async def events_of(
    js: JetStreamContext, stream: str, contracts: dict[str, type[Event]] = STUDY_EVENTS
) -> list[Event]:
    """The valid events on the subjects of ``contracts``, oldest first (the services reported
    the invalid ones when they were published)."""
    return [logged.event for logged in await logged_events(js, stream, contracts)]


async def logged_events(
    js: JetStreamContext, stream: str, contracts: dict[str, type[Event]] = STUDY_EVENTS
) -> list[LoggedEvent]:
    """:func:`events_of` with each event's stream sequence and subject."""
    found: list[LoggedEvent] = []
    for subject, contract in contracts.items():
        found += await _subject_history(js, stream, subject, contract)
    found.sort(key=lambda logged: logged.seq)
    return found


async def _subject_history(
    js: JetStreamContext, stream: str, subject: str, contract: type[Event]
) -> list[LoggedEvent]:
    # How many to read is known before subscribing: a consumer's own pending count moves as
    # soon as the server starts pushing.
    per_subject = (await js.stream_info(stream, subjects_filter=subject)).state.subjects or {}
    remaining = sum(per_subject.values())
    history: list[LoggedEvent] = []
    if remaining == 0:
        return history
    replay = await js.subscribe(
        subject,
        stream=stream,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
    )
    try:
        while remaining > 0:
            remaining -= 1
            msg = await replay.next_msg(timeout=NEXT_MESSAGE_TIMEOUT_S)
            try:
                event = contract.model_validate_json(msg.data)
            except ValidationError:
                continue
            history.append(LoggedEvent(msg.metadata.sequence.stream, msg.subject, event))
    finally:
        await replay.unsubscribe()
    return history
