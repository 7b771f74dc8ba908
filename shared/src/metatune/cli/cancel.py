"""``metatune cancel``: withdraw a requested job (the scheduler stops it wherever it runs)."""

from __future__ import annotations

import asyncio
from uuid import UUID

import typer
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from rich.console import Console

from .. import subjects
from ..bus import headers_for
from ..bus.auth import SUBMITTER
from ..bus.streams import stream_for
from ..contracts import JobCancelled, JobRequested
from ..errors import BusUnavailable
from ..settings import Settings, get_settings
from .connect import bus, err_console, fail, unavailable
from .eventlog import read_log
from .output import JSON_HELP, print_json
from .submit import platform_clock
from .validation import parse_id

console = Console()


def cancel(
    job: str = typer.Argument(
        ..., metavar="JOB_ID", help="The job (trial) id, as in `metatune events`"
    ),
    reason: str = typer.Option(
        "cancelled by the user", help="Why: kept in the event log and sent to the study's webhook"
    ),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Cancel JOB_ID: publish metatune.jobs.cancelled; prints the event id."""
    settings = get_settings()
    job_id = parse_id(job, "job")

    async def run() -> JobCancelled:
        async with bus(settings, SUBMITTER) as nc:
            js = nc.jetstream()
            await check_requested(js, settings, job_id)
            clock = await platform_clock(js)
            event = JobCancelled(occurred_at=clock.now(), job_id=job_id, reason=reason)
            await js.publish(
                subjects.JOBS_CANCELLED,
                event.to_bytes(),
                headers=headers_for(event),
                stream=stream_for(subjects.JOBS_CANCELLED, settings),
            )
            return event

    try:
        event = asyncio.run(run())
    except BusUnavailable as exc:
        raise unavailable(exc) from None
    except ValueError as exc:
        raise fail(f"invalid cancellation: {exc}") from None
    if json_output:
        print_json({"event_id": str(event.event_id), "job_id": str(job_id), "reason": reason})
    else:
        console.print(str(event.event_id))


async def check_requested(js: JetStreamContext, settings: Settings, job_id: UUID) -> None:
    """Refuse a job the log never requested. A user who may not read the log (an external submitter)
    is warned instead; the scheduler then reports an unknown job on metatune.errors.scheduler."""
    try:
        logged = await read_log(js, settings.stream_name, {subjects.JOBS_REQUESTED: JobRequested})
    except (NatsError, TimeoutError) as exc:
        err_console.print(
            f"warning: could not check that job {job_id} exists ({type(exc).__name__})",
            highlight=False,
        )
        return
    if not any(
        isinstance(item.event, JobRequested) and item.event.job_id == job_id for item in logged
    ):
        raise fail(f"no job {job_id} in the event log", code=1)
