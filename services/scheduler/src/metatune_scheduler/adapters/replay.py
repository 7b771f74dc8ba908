"""Rebuild the scheduler's state from the JetStream event log (no state lives only in memory)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from metatune import catalog, subjects, tenancy
from metatune.contracts import (
    Assignment,
    CarbonForecast,
    Event,
    JobCancelled,
    JobInfeasible,
    JobRequested,
    Plan,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
)
from metatune.provenance import RUN_EVENTS, mislabelled

log = logging.getLogger("metatune.scheduler.replay")
# Every contract the service consumes on the event stream must be here, or a restart forgets it
# (a test checks the service's consumers against this set).
FOLDED: frozenset[type[Event]] = frozenset(
    {
        JobRequested,
        JobCancelled,
        JobInfeasible,
        Plan,
        CarbonForecast,
        Assignment,
        RunProgress,
        RunPaused,
        RunCompleted,
        RunFailed,
    }
)


def contract_for(subject: str) -> type[Event] | None:
    """The contract of a subject the scheduler folds into its state (None: not ours): the
    catalog's (:func:`metatune.catalog.contract_for`), if it is one of :data:`FOLDED`."""
    model = catalog.contract_for(subject)
    return model if model in FOLDED else None


async def replay(
    js: JetStreamContext, stream: str, apply: Callable[[Event], object], idle_s: float = 0.5
) -> int:
    """Fold every scheduler-relevant event of ``stream`` from its start; returns how many.

    An ordered (ephemeral, flow-controlled) consumer reads until nothing is pending."""
    info = await js.stream_info(stream)
    if info.state.messages == 0:
        return 0
    sub = await js.subscribe(
        subjects.EVERYTHING, stream=stream, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    folded = 0
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=idle_s)
            except TimeoutError:
                break
            model = contract_for(msg.subject)
            if model is not None:
                try:
                    event = model.model_validate_json(msg.data)
                except ValidationError:  # reported by the live consumer when it first arrived
                    log.debug("skipping invalid %s message in replay", msg.subject)
                else:
                    # a run event whose payload names another datacenter than its subject was
                    # refused live; the state refuses one from elsewhere than its job's datacenter
                    # (and a cancellation under another tenant's subject than it names)
                    if not (
                        (isinstance(event, RUN_EVENTS) and mislabelled(event, msg.subject))
                        or (
                            isinstance(event, JobCancelled)
                            and tenancy.mislabelled(subjects.tenant_of(msg.subject), event.tenant)
                        )
                    ):
                        apply(event)
                        folded += 1
            if msg.metadata.num_pending == 0:
                break
    finally:
        await sub.unsubscribe()
    return folded
