"""The clock through the bus: a shared simulated-clock anchor in KV, and hourly ticks.

Every process that loads the simulated clock reads the same anchor, so they agree on the
simulated time. Every service also runs a ticker that publishes ``metatune.clock.tick`` at
each hour with ``Nats-Msg-Id = tick-<hour>``: JetStream keeps one tick per hour however many
services publish it, so no single process is needed to drive time.
"""

from __future__ import annotations

import contextlib
import logging

from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from ..clock import Clock, RealClock, SimulatedClock, new_anchor
from ..contracts import ClockAnchor
from ..settings import Settings
from .streams import CLOCK_BUCKET

ANCHOR_KEY = "anchor"
log = logging.getLogger("metatune.clock")


async def load_anchor(js: JetStreamContext) -> ClockAnchor | None:
    kv = await js.key_value(CLOCK_BUCKET)
    try:
        entry = await kv.get(ANCHOR_KEY)
    except KeyNotFoundError:
        return None
    return ClockAnchor.model_validate_json(entry.value) if entry.value else None


async def get_or_create_anchor(js: JetStreamContext, settings: Settings) -> ClockAnchor:
    """The simulation's anchor; the first process to ask creates it (atomically)."""
    existing = await load_anchor(js)
    if existing is not None:
        return existing
    kv = await js.key_value(CLOCK_BUCKET)
    anchor = new_anchor(settings.sim_seconds_per_hour, settings.sim_start)
    with contextlib.suppress(KeyWrongLastSequenceError):  # another process won: use its anchor
        await kv.create(ANCHOR_KEY, anchor.model_dump_json().encode())
    found = await load_anchor(js)
    assert found is not None
    return found


async def reset_anchor(js: JetStreamContext, anchor: ClockAnchor) -> None:
    """Start a new simulation (``metatune up --simulate``)."""
    kv = await js.key_value(CLOCK_BUCKET)
    await kv.put(ANCHOR_KEY, anchor.model_dump_json().encode())


async def load_clock(js: JetStreamContext, settings: Settings) -> Clock:
    if settings.clock == "real":
        return RealClock()
    return SimulatedClock(await get_or_create_anchor(js, settings))
