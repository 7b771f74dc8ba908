"""Retry a bus operation through a transient outage (NATS restarting, a leaf link down).

A publish or an object-store upload that times out while the connection reconnects is not a
failure of the work that produced it: it is retried with exponential backoff (capped, from
:mod:`metatune.backoff`) until a time budget runs out (``METATUNE_BUS_RETRY_BUDGET_S``, default
180 s, so an outage of a minute or two is ridden out). Re-sending is safe: events carry
``Nats-Msg-Id`` (JetStream stores one) and objects are overwritten whole under the same key.

:func:`retrying` is the platform's one retry loop: HTTP providers and PostgreSQL reconnects use
it too, with their own ``transient`` errors (and ``budget_s=math.inf`` to wait for ever).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
import nats.js.errors

from ..backoff import backoff_s
from ..errors import BusUnavailable

T = TypeVar("T")
log = logging.getLogger("metatune.bus.retry")

# Errors of a bus that is down or reconnecting; anything else (a bad payload, a bug) is not retried.
TRANSIENT: tuple[type[BaseException], ...] = (
    TimeoutError,
    asyncio.TimeoutError,
    ConnectionError,
    OSError,
    nats.errors.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.NoRespondersError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.FlushTimeoutError,
    nats.js.errors.ServiceUnavailableError,
)


async def retrying(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    budget_s: float,
    initial_s: float = 0.5,
    max_delay_s: float = 10.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    transient: tuple[type[BaseException], ...] = TRANSIENT,
    wait_hint: Callable[[BaseException], float | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    attempts: int | None = None,
) -> T:
    """Await ``operation()`` until it succeeds; on a transient error wait (doubling from
    ``initial_s`` up to ``max_delay_s``) and try again, for at most ``budget_s`` seconds.

    ``transient`` names the errors worth retrying (default: a bus that is down); ``wait_hint``
    may ask for a longer wait after a given error (an HTTP ``Retry-After``); ``clock`` and
    ``sleep`` are injectable so tests run without waiting; ``attempts``, if given, also bounds
    the number of tries (``budget_s`` may then be ``math.inf``). The waits are
    :func:`metatune.backoff.backoff_s`. Raises :class:`~metatune.errors.BusUnavailable` once the
    budget or the attempts are spent (the last error chained); other errors propagate at once."""
    deadline = clock() + budget_s
    attempt = 1
    while True:
        try:
            return await operation()
        except transient as exc:
            left = deadline - clock()
            if left <= 0:
                raise BusUnavailable(
                    "the bus", f"{what}: no answer for {budget_s:.0f} s ({exc!r})"
                ) from exc
            if attempts is not None and attempt >= attempts:
                raise BusUnavailable(
                    "the bus", f"{what}: no answer after {attempt} attempt(s) ({exc!r})"
                ) from exc
            hint = wait_hint(exc) if wait_hint is not None else None
            wait = min(max(backoff_s(attempt, initial_s, max_delay_s), hint or 0.0), left)
            log.warning("%s failed (attempt %d, %r); retrying in %.1f s", what, attempt, exc, wait)
            await sleep(wait)
            attempt += 1


# What a caller that already retried treats as "the bus is down" (not a fault of the work): the
# budget spent, or a NATS error. Narrower than TRANSIENT (no OSError: a missing file is not an outage).
BUS_ERRORS: tuple[type[BaseException], ...] = (BusUnavailable, TimeoutError, nats.errors.Error)
