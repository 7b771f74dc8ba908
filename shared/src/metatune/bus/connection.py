"""One-shot NATS connection for command-line tools and probes: fail fast, quietly, with the URL."""

from __future__ import annotations

import asyncio

import nats
from nats.aio.client import Client

from ..errors import BusUnavailable


async def _silent(_: Exception) -> None:
    return None


async def connect_once(url: str, timeout_s: float) -> Client:
    """Connect or raise :class:`BusUnavailable` within about ``timeout_s`` (no reconnect loop)."""
    try:
        return await asyncio.wait_for(
            nats.connect(url, connect_timeout=timeout_s, max_reconnect_attempts=1, allow_reconnect=False,
                         reconnect_time_wait=0, error_cb=_silent),
            timeout=timeout_s * 2 + 1,
        )
    except Exception as exc:
        raise BusUnavailable(url, type(exc).__name__) from exc
