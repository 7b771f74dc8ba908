"""How every view (the demo, the CLI, the dashboard, the disclosure) shows what they share."""

from __future__ import annotations


def trial_label(trial_index: int | None) -> str:
    """A trial's number as people read it: ``#1`` is a study's first trial (``trial_index`` 0).
    JSON outputs keep the 0-based ``trial_index`` of the contracts."""
    return "#?" if trial_index is None else f"#{trial_index + 1}"


EARLY_STOPPED = "early-stopped"
NO_MORE_TRIALS = "no more trials will be requested"


def trial_outcome(
    status: str,
    *,
    early_stopped: bool | None = False,
    stop_reason: str | None = None,
    steps: int | None = None,
) -> str:
    """How a trial ended, in the words every view uses: a completion the early stopper cut short
    is ``early-stopped (<why>, step N)``, never ``completed``; other statuses read as they are."""
    if status != "completed" or not early_stopped:
        return status
    detail = [part for part in (stop_reason, None if steps is None else f"step {steps}") if part]
    return f"{EARLY_STOPPED} ({', '.join(detail)})" if detail else EARLY_STOPPED


def study_state(stop_reason: str | None, unfinished: int) -> str:
    """Where a study stands: trials are still being requested; the recommender requests no more
    (its budget, expected improvement; or the study was cancelled) while ``unfinished`` trials run; or finished (every
    trial ended)."""
    if stop_reason is None:
        return "requesting trials"
    if stop_reason == "cancelled":  # StopReason.cancelled: its trials are withdrawn too
        return f"cancelled; {unfinished} still to stop" if unfinished else "cancelled"
    if unfinished:
        return f"{NO_MORE_TRIALS} ({stop_reason}); {unfinished} still to finish"
    return f"finished ({stop_reason})"


def beside_baseline(accuracy: float | None, majority: float | None, digits: int = 3) -> str:
    """An accuracy with its dataset's majority-class baseline beside it, saying when the run
    does not beat it: ``0.733 (majority 0.600)``, ``0.317 (below majority 0.400)``."""
    if accuracy is None:
        return "-"
    shown = f"{accuracy:.{digits}f}"
    if majority is None:
        return shown
    word = "majority" if accuracy > majority else "below majority"
    return f"{shown} ({word} {majority:.{digits}f})"
