"""How every view (the demo, the CLI, the dashboard, the disclosure) shows what they share."""

from __future__ import annotations

import re

from .deadlines import MET, DeadlineOutcome

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` safe to print on any terminal: a lone surrogate (which no encoding can write) and a
    control character (which could move the cursor or recolour the screen) as escapes such as
    ``\\ud800`` and ``\\x1b``; everything else as it is."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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


def study_state(
    stop_reason: str | None, unfinished: int, deadline: DeadlineOutcome | None = None
) -> str:
    """Where a study stands: trials are still being requested; the recommender requests no more
    (its budget, expected improvement; or the study was cancelled) while ``unfinished`` trials
    run; or finished (every trial ended), with how its ended trials stand against ``deadline``
    (:mod:`metatune.deadlines`): ``finished (budget), met its deadline``, ``finished (budget)
    after its deadline (1 trial late, by 2 h 06 min)``."""
    late = "" if deadline is None or deadline.met else deadline.lateness()
    if stop_reason is None:
        return "requesting trials" + (f"; {late} so far" if late else "")
    if stop_reason == "cancelled":  # StopReason.cancelled: its trials are withdrawn too
        return f"cancelled; {unfinished} still to stop" if unfinished else "cancelled"
    if unfinished:
        return f"{NO_MORE_TRIALS} ({stop_reason}); {unfinished} still to finish" + (
            f"; {late} so far" if late else ""
        )
    if deadline is None:
        return f"finished ({stop_reason})"
    if late:
        return f"finished ({stop_reason}) after its deadline ({late})"
    return f"finished ({stop_reason}), {MET}"


def chance_baseline(n_classes: int | None) -> float | None:
    """The accuracy of guessing a label uniformly at random: 1 / the number of classes the
    profiler counted; None where there are none (a causal LM) or the count is unknown."""
    return 1 / n_classes if n_classes else None


def beside_baseline(
    accuracy: float | None,
    majority: float | None,
    chance: float | None = None,
    *,
    digits: int = 3,
) -> str:
    """An accuracy with its dataset's baselines beside it, the majority-class one (always predicting
    the most common label) and chance (1 / classes), saying which the run does not beat:
    ``0.733 (majority 0.600, chance 0.250)``, ``0.317 (below majority 0.400, chance 0.250)``."""
    if accuracy is None:
        return "-"
    shown = f"{accuracy:.{digits}f}"
    beside = [
        f"{'' if accuracy > value else 'below '}{name} {value:.{digits}f}"
        for name, value in (("majority", majority), ("chance", chance))
        if value is not None
    ]
    return f"{shown} ({', '.join(beside)})" if beside else shown


def prediction(
    predicted: float | None, std: float | None, interval: tuple[float, float] | None
) -> str:
    """A published prediction: ``0.537 (0.21-0.86)`` with its 80 % interval, ``0.537 ± 0.247``
    where none was published, ``-`` without one."""
    if predicted is None:
        return "-"
    if interval:
        return f"{predicted:.3f} ({interval[0]:.2f}-{interval[1]:.2f})"
    return f"{predicted:.3f} ± {std or 0.0:.3f}"
