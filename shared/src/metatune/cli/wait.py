"""``metatune submit --wait``: follow a study in the event log until it finishes.

Every few seconds the log is read again and the study folded from it (as ``study show`` does);
each change of its state is reported once. It ends when the recommender requests no more trials
and every trial has ended, or when the wall-clock limit passes (exit 4: the study goes on, and
``metatune study show ID`` follows it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from uuid import UUID

from ..settings import Settings
from .connect import fail
from .studies import Study
from .study import load_studies

EXIT_STILL_RUNNING = 4
POLL_S = 3.0


def progress_line(study: Study) -> str:
    """One line of where the study stands: its state and its trials' outcomes so far."""
    summary = study.summary()
    budget = summary["trials_budget"]
    parts = [
        f"{summary['name'] or study.study_id}: {study.status}",
        f"{summary['trials_completed']}/{budget or '?'} trials completed",
    ]
    if summary["trials_early_stopped"]:
        parts.append(f"{summary['trials_early_stopped']} of them early-stopped")
    if summary["trials_failed"]:
        parts.append(f"{summary['trials_failed']} failed")
    return ", ".join(parts)


def wait_for_study(
    settings: Settings,
    study_id: UUID,
    timeout_s: float,
    report: Callable[[str], None],
) -> Study:
    """The study once finished; each new progress line goes to ``report``. Past ``timeout_s``:
    one error line and exit 4."""
    give_up = time.monotonic() + timeout_s
    last = ""
    while True:
        study = load_studies(settings).get(study_id)
        line = progress_line(study) if study is not None else f"{study_id}: submitted"
        if line != last:
            report(line)
            last = line
        if study is not None and study.finished:
            return study
        if time.monotonic() >= give_up:
            raise fail(
                f"study {study_id} has not finished after {timeout_s:.0f} s; it goes on: "
                f"`metatune study show {study_id}` follows it",
                code=EXIT_STILL_RUNNING,
            )
        time.sleep(min(POLL_S, max(0.0, give_up - time.monotonic())))
