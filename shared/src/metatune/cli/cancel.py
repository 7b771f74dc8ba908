"""``metatune cancel``: withdraw a requested job (the scheduler stops it wherever it runs)."""

from __future__ import annotations

import typer
from rich.console import Console

from .calls import client
from .connect import err_console
from .output import JSON_HELP, print_json

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
    with client() as metatune:
        done = metatune.cancel(job, reason)
    if done.check_skipped:  # a submitter that may not read the log: the scheduler reports it
        err_console.print(
            f"warning: could not check that job {done.job_id} exists ({done.check_skipped})",
            highlight=False,
        )
    if json_output:
        print_json({"event_id": str(done.event_id), "job_id": str(done.job_id), "reason": reason})
    else:
        console.print(str(done.event_id))
