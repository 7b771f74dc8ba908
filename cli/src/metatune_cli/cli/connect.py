"""Connecting the CLI to the bus, failing with one clear line when NATS is not there."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING

import typer

# every command imports this module, and `metatune --help` must not import the NATS client
if TYPE_CHECKING:
    from nats.aio.client import Client
    from rich.console import Console

    from metatune.settings import Settings


@cache
def err_console() -> Console:
    """The console of the CLI's messages on stderr (rich loads with the first message)."""
    from rich.console import Console

    return Console(stderr=True)


# exit codes: 1 what was asked for does not exist (no such study, job, adapter), 2 bad input
# (usage, options, a file), 3 a server the command needs does not answer (NATS, PostgreSQL)
EXIT_NOT_FOUND, EXIT_BAD_INPUT, EXIT_UNAVAILABLE = 1, 2, 3


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """One ``error:`` line on stderr, and, when the command was asked for ``--json``, one JSON
    object on stdout too (``error``, ``exit_code``): a script reading stdout always gets one."""
    err_console().print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    if json_requested():
        print(json.dumps({"error": message, "exit_code": code}), flush=True)
    return typer.Exit(code)


def json_requested() -> bool:
    """Whether the command line asks for ``--json`` (typer keeps its click context under no public
    name, so the process's own arguments say it; before ``--`` only)."""
    args = sys.argv[1:]
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def unavailable(exc: Exception) -> typer.Exit:
    """One line for a server that does not answer, and exit code 3 (not a usage error)."""
    return fail(str(exc), code=EXIT_UNAVAILABLE)


@asynccontextmanager
async def bus(settings: Settings, user: str | None = None) -> AsyncIterator[Client]:
    """A connection as ``user`` (the admin, by default, for platform commands; the submitter for
    submit / cancel)."""
    from metatune.bus.auth import ADMIN
    from metatune.bus.connection import connect_as

    nc = await connect_as(settings, user or ADMIN)
    try:
        yield nc
    finally:
        await nc.close()
