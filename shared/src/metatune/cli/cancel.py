"""``metatune cancel``: withdraw a requested job (the scheduler stops it wherever it runs)."""

from __future__ import annotations

import asyncio
from uuid import UUID

import typer
from rich.console import Console

from .. import subjects
from ..bus import headers_for
from ..bus.streams import stream_for
from ..contracts import JobCancelled
from ..errors import BusUnavailable
from ..settings import get_settings
from ..bus.auth import SUBMITTER
from .connect import bus, fail
from .submit import platform_clock

console = Console()


def cancel(
    job_id: UUID = typer.Argument(..., help="The job (trial) id, as in `metatune events`"),
    reason: str = typer.Option("cancelled by the user", help="Why: kept in the event log and sent to the study's webhook"),
) -> None:
    """Cancel JOB_ID: publish metatune.jobs.cancelled; prints the event id."""
    settings = get_settings()

    async def run() -> JobCancelled:
        async with bus(settings, SUBMITTER) as nc:
            js = nc.jetstream()
            clock = await platform_clock(js)
            event = JobCancelled(occurred_at=clock.now(), job_id=job_id, reason=reason)
            await js.publish(subjects.JOBS_CANCELLED, event.to_bytes(), headers=headers_for(event),
                             stream=stream_for(subjects.JOBS_CANCELLED, settings))
            return event

    try:
        event = asyncio.run(run())
    except BusUnavailable as exc:
        raise fail(str(exc)) from None
    except ValueError as exc:
        raise fail(f"invalid cancellation: {exc}") from None
    console.print(str(event.event_id))
