"""Wait for the state a test expects instead of sleeping for a guessed time.

The timeout only bounds a failure: a passing test waits exactly as long as the state takes to
appear, so a slow machine makes the suite slower, never red.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

POLL_S = 0.05  # how often a predicate is re-evaluated; not a bound on anything


async def wait_for(
    predicate: Callable[[], T | Awaitable[T]],
    what: str = "the expected state",
    *,
    timeout: float = 60.0,
) -> T:
    """Evaluate ``predicate`` (sync or async) until it returns something truthy and return that;
    fail with ``what`` after ``timeout`` seconds. An exception the predicate raises propagates
    (a predicate may fail fast on a state that can never turn good)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise AssertionError(f"{what}: not reached within {timeout:g} s")
        await asyncio.sleep(POLL_S)


def wait_for_sync(
    predicate: Callable[[], T], what: str = "the expected state", *, timeout: float = 60.0
) -> T:
    """:func:`wait_for` for code outside an event loop (process start-up, files a child writes)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached within {timeout:g} s")
        time.sleep(POLL_S)


async def received_on(nc: Any, subject: str, contract: type) -> list:
    """Subscribe ``nc`` to ``subject``; the returned list fills with each message decoded as
    ``contract`` (wait on it with :func:`wait_for`)."""
    received: list = []

    async def on_message(msg: Any) -> None:
        received.append(contract.model_validate_json(msg.data))

    await nc.subscribe(subject, cb=on_message)
    return received
