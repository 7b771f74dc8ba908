"""Long handlers: keep JetStream from redelivering a message that is still being worked on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from faststream.nats import NatsMessage

Result = TypeVar("Result")


async def while_working(message: NatsMessage, work: Awaitable[Result], every_s: float) -> Result:
    """Await ``work``, sending JetStream an in-progress ack every ``every_s`` seconds, so a handler
    that runs longer than ``ack_wait`` (a 2 GB profile, a training smoke test) is not handed to
    another replica meanwhile."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every_s)
            if done:
                return task.result()
            await message.in_progress()
    finally:
        if not task.done():
            task.cancel()
