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
    """Cancel JOB_ID: publish metatune.jobs.cancelled; prints the event id (nothing is published
    for a job that has already ended; one the scheduler does not know is an error, exit 1)."""
    with client() as metatune:
        done = metatune.cancel(job, reason)
    if done.event_id is None:  # the scheduler says it has ended: nothing to withdraw
        ended = "finished" if done.state == "finished" else "been cancelled"
        message = f"job {done.job_id} has already {ended}: nothing to cancel"
        if json_output:
            print_json({"event_id": None, "job_id": str(done.job_id), "state": done.state})
        else:
            console.print(message, highlight=False)
        return
    if done.check_skipped:  # the scheduler did not answer and the log could not be read
        err_console.print(
            f"warning: could not check that job {done.job_id} exists ({done.check_skipped})",
            highlight=False,
        )
    if json_output:
        print_json({"event_id": str(done.event_id), "job_id": str(done.job_id), "reason": reason})
    else:
        console.print(str(done.event_id))
