"""Does something answer at a URL? Used to decide whether to start embedded servers."""

from __future__ import annotations

import asyncio
import socket
from typing import Any
from urllib.parse import urlsplit

import psycopg

from metatune.bus.connection import connect_once
from metatune.errors import BusUnavailable


def host_port(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


async def nats_answers(url: str, timeout_s: float, **auth: Any) -> bool:
    """True when a NATS at ``url`` accepts us (with ``auth``, if given)."""
    try:
        nc = await connect_once(url, timeout_s, **auth)
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


def nats_answers_sync(url: str, timeout_s: float, **auth: Any) -> bool:
    return asyncio.run(nats_answers(url, timeout_s, **auth))


def nats_requires_auth(url: str, timeout_s: float) -> bool | None:
    """Whether the server at ``url`` asks for credentials (its INFO says so); None: nothing answers."""
    import json

    try:
        with socket.create_connection(host_port(url, 4222), timeout=timeout_s) as sock:
            line = sock.makefile("rb").readline(65536)
    except OSError:
        return None
    if not line.startswith(b"INFO "):
        return None
    return bool(json.loads(line[5:]).get("auth_required", False))
