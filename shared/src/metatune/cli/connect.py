"""Connecting the CLI to the bus, failing with one clear line when NATS is not there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import typer
from nats.aio.client import Client
from rich.console import Console

from ..bus.auth import ADMIN
from ..bus.connection import connect_as
from ..settings import Settings

err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@asynccontextmanager
async def bus(settings: Settings, user: str = ADMIN) -> AsyncIterator[Client]:
    """A connection as ``user`` (the admin for platform commands, the submitter for submit / cancel)."""
    nc = await connect_as(settings, user)
    try:
        yield nc
    finally:
        await nc.close()
