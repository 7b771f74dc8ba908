"""Connecting the CLI to the bus, failing with one clear line when NATS is not there."""

from __future__ import annotations

from contextlib import asynccontextmanager
from collections.abc import AsyncIterator

import nats
import typer
from nats.aio.client import Client
from rich.console import Console

from ..errors import BusUnavailable
from ..settings import Settings

err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@asynccontextmanager
async def bus(settings: Settings) -> AsyncIterator[Client]:
    try:
        nc = await nats.connect(
            settings.nats_url,
            connect_timeout=settings.connect_timeout_s,
            max_reconnect_attempts=0,
            allow_reconnect=False,
        )
    except Exception as exc:
        raise BusUnavailable(settings.nats_url, type(exc).__name__) from exc
    try:
        yield nc
    finally:
        await nc.close()
