"""The commands that call :mod:`metatune_cli.client`: one client per command, and each of its errors
as the CLI's one ``error:`` line and exit code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from metatune.settings import Settings, get_settings

from ..client.errors import BusUnavailable, InvalidRequest, NotFound, StillRunning
from .connect import EXIT_NOT_FOUND, fail, unavailable

if TYPE_CHECKING:
    from ..client.sync import Client

EXIT_STILL_RUNNING = 4  # `submit --wait` gave up; the study goes on


def failure(exc: Exception) -> typer.Exit:
    """The exit (after its one line) for an error the client raised."""
    if isinstance(exc, BusUnavailable):
        return unavailable(exc)
    if isinstance(exc, NotFound):
        return fail(str(exc), code=EXIT_NOT_FOUND)
    if isinstance(exc, StillRunning):
        return fail(str(exc), code=EXIT_STILL_RUNNING)
    return fail(str(exc))  # InvalidRequest: bad input, exit 2


@contextmanager
def client(settings: Settings | None = None) -> Iterator[Client]:
    """A client for one command; what it raises ends the command with one line."""
    from ..client.sync import Client  # the bus client, imported by a command that runs

    try:
        with Client(settings or get_settings()) as opened:
            yield opened
    except (BusUnavailable, InvalidRequest, NotFound, StillRunning) as exc:
        raise failure(exc) from None
