"""Does something answer at a URL? Used to decide whether to start embedded servers."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import psycopg

from ..bus.connection import connect_once
from ..errors import BusUnavailable


def host_port(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


async def nats_answers(url: str, timeout_s: float) -> bool:
    try:
        nc = await connect_once(url, timeout_s)
    except BusUnavailable:
        return False
    await nc.close()
    return True


def postgres_answers(url: str, timeout_s: float) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=max(1, int(timeout_s))):
            return True
    except psycopg.Error:
        return False


def nats_answers_sync(url: str, timeout_s: float) -> bool:
    return asyncio.run(nats_answers(url, timeout_s))
