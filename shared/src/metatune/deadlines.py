"""Whether a study met its deadline, and how every view says so.

A trial is late when its run ended (completed, early-stopped or failed) after its study's
deadline; a study met its deadline when none of its ended trials is late. The lateness told is the
latest trial's: ``finished after its deadline (3 trials late, by up to 2 h 06 min)``. Times are
the platform's clock (simulated in the demo), as every event carries them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

MET = "met its deadline"


def duration(span: timedelta) -> str:
    """A span as people read it: ``45 s``, ``12 min``, ``2 h 06 min``, ``1 d 3 h``."""
    seconds = max(0, round(span.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


@dataclass(frozen=True)
class DeadlineOutcome:
    """How a study's ended trials stand against its deadline."""

    deadline: datetime
    ended: int  # trials whose run ended
    late: int  # of which after the deadline
    late_by: timedelta | None  # the latest one's lateness (None: none late)

    @property
    def met(self) -> bool:
        return self.late == 0

    @property
    def late_by_s(self) -> float | None:
        return None if self.late_by is None else self.late_by.total_seconds()

    def words(self) -> str:
        """``met its deadline`` or ``finished after its deadline (1 trial late, by 2 h 06 min)``."""
        if self.met or self.late_by is None:
            return MET
        return f"finished after its deadline ({self.lateness()})"

    def lateness(self) -> str:
        """``3 trials late, by up to 2 h 06 min`` (empty: none late)."""
        if self.met or self.late_by is None:
            return ""
        trials = "1 trial" if self.late == 1 else f"{self.late} trials"
        upto = "" if self.late == 1 else "up to "
        return f"{trials} late, by {upto}{duration(self.late_by)}"

    def cell(self) -> str:
        """The closing table's cell: ``met`` or ``3 late, by up to 2 h 06 min``."""
        if self.met or self.late_by is None:
            return "met"
        upto = "" if self.late == 1 else "up to "
        return f"{self.late} late, by {upto}{duration(self.late_by)}"


def outcome_fields(outcome: DeadlineOutcome | None) -> dict[str, Any]:
    """The fields a view's JSON carries for ``outcome`` (None: no trial has ended yet)."""
    return {
        "deadline_met": None if outcome is None else outcome.met,
        "trials_late": 0 if outcome is None else outcome.late,
        "late_by_s": None if outcome is None else outcome.late_by_s,
        "deadline_outcome": None if outcome is None else outcome.words(),
    }


def deadline_outcome(deadline: datetime, ended_at: Iterable[datetime]) -> DeadlineOutcome:
    """``ended_at``: when each of the study's trials ended (those not ended left out)."""
    ends = list(ended_at)
    late = [end - deadline for end in ends if end > deadline]
    return DeadlineOutcome(deadline, len(ends), len(late), max(late) if late else None)
