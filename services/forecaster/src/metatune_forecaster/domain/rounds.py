"""Which hour's forecast round runs, and how far the forecaster is behind the clock.

Each hour's round runs once: a tick delivered again while (or after) its round runs, and an hour
older than one already begun, are skipped; a round that failed may run again. A round that ends
after its hour has passed overran. The lag is how long ago the hour after the last completed
round began (0 while up to date); a lag of an hour or more is ``behind``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

HOUR = timedelta(hours=1)


@dataclass
class Rounds:
    begun: datetime | None = None  # the latest hour whose round began
    completed: datetime | None = None  # the latest hour whose round ended

    def claim(self, hour: datetime) -> bool:
        """True when ``hour``'s round is to run now: no round of it, or of a later hour, began."""
        if self.begun is not None and hour <= self.begun:
            return False
        self.begun = hour
        return True

    def abandon(self, hour: datetime) -> None:
        """``hour``'s round failed: a redelivery of its tick may run it again."""
        if self.begun == hour:
            self.begun = self.completed

    def finish(self, hour: datetime, now: datetime) -> timedelta | None:
        """``hour``'s round ended at ``now``; how long after the hour's end, if it overran."""
        self.completed = hour if self.completed is None else max(self.completed, hour)
        overrun = now - (hour + HOUR)
        return overrun if overrun > timedelta(0) else None

    def lag(self, now: datetime) -> timedelta:
        if self.completed is None:
            return timedelta(0)
        return max(timedelta(0), now - (self.completed + HOUR))

    def behind(self, now: datetime) -> bool:
        return self.lag(now) >= HOUR
