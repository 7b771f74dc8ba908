"""``metatune cancel``: withdraw a requested job (the scheduler stops it wherever it runs), or a
whole study (``--study``: the recommender requests none of its trials afterwards)."""

from __future__ import annotations

import typer
from rich.console import Console

from ..client import Cancellation, StudyCancellation
from .calls import client
from .connect import err_console, fail
from .output import JSON_HELP, print_json

console = Console()


def cancel(
    job: str | None = typer.Argument(
        None, metavar="[JOB_ID]", help="The job (trial) id, as in `metatune events`"
    ),
    study: str | None = typer.Option(
        None,
        "--study",
        metavar="STUDY_ID",
        help="Cancel the whole study instead (its id or a unique prefix, as in `metatune study list`)",
    ),
    reason: str = typer.Option(
        "cancelled by the user", help="Why: kept in the event log and sent to the study's webhook"
    ),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Cancel JOB_ID: publish metatune.jobs.cancelled.<tenant>; prints the event id (nothing is published
    for a job that has already ended; one the scheduler does not know is an error, exit 1). With
    --study: publish metatune.studies.cancelled.<tenant>, then cancel each trial not ended."""
    if (job is None) == (study is None):
        raise fail("give either JOB_ID or --study STUDY_ID, not both and not neither")
    with client() as metatune:
        if study is not None:
            _study_done(metatune.cancel_study(study, reason), json_output)
            return
        assert job is not None  # one of the two, checked above
        done = metatune.cancel(job, reason)
    _job_done(done, reason, json_output)


def _study_done(done: StudyCancellation, json_output: bool) -> None:
    if json_output:
        print_json(
            {
                "event_id": str(done.event_id),
                "study_id": str(done.study_id),
                "reason": done.reason,
                "cancelled_jobs": [
                    {"job_id": str(c.job_id), "event_id": str(c.event_id)} for c in done.cancelled
                ],
            }
        )
        return
    trials = len(done.cancelled)
    console.print(
        f"study {done.study_id} cancelled ({done.event_id}); "
        f"{trials} trial{'' if trials == 1 else 's'} not ended withdrawn",
        highlight=False,
    )


def _job_done(done: Cancellation, reason: str, json_output: bool) -> None:
    if done.event_id is None:  # the scheduler says it has ended: nothing to withdraw
        ended = "finished" if done.state == "finished" else "been cancelled"
        message = f"job {done.job_id} has already {ended}: nothing to cancel"
        if json_output:
            print_json({"event_id": None, "job_id": str(done.job_id), "state": done.state})
        else:
            console.print(message, highlight=False)
        return
    if done.check_skipped:  # the scheduler did not answer and the log could not be read
        err_console().print(
            f"warning: could not check that job {done.job_id} exists ({done.check_skipped})",
            highlight=False,
        )
    if json_output:
        print_json({"event_id": str(done.event_id), "job_id": str(done.job_id), "reason": reason})
    else:
        console.print(str(done.event_id))
