"""Connecting the CLI to the bus, failing with one clear line when NATS is not there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import typer
from nats.aio.client import Client
from rich.console import Console

from ..bus.connection import connect_once
from ..settings import Settings

err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@asynccontextmanager
async def bus(settings: Settings) -> AsyncIterator[Client]:
    nc = await connect_once(settings.nats_url, settings.connect_timeout_s)
    try:
        yield nc
    finally:
        await nc.close()
