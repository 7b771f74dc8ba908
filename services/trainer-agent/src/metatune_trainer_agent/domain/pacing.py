"""Pace training by the plan under the simulated clock.

A job the scheduler estimated at ``estimated_hours`` (wall hours on its GPUs) and assigned for a
stretch runs ``total_steps / estimated_hours`` optimizer steps per scheduled hour: in each
simulated hour of the stretch it may reach ``steps_per_hour x (hours elapsed + 1)`` steps, then
waits for the next hour. A demo thus shows real training that advances as the plan says. Under
the real clock there is no pacer: the job runs flat out.
"""

from __future__ import annotations

import math
from datetime import datetime

from metatune.clock import HOUR, Clock, floor_hour


class StepPacer:
    def __init__(
        self,
        clock: Clock,
        *,
        total_steps: int,
        estimated_hours: float,
        start: datetime | None = None,
    ) -> None:
        if estimated_hours <= 0:
            raise ValueError("estimated_hours must be positive")
        self.clock = clock
        self.steps_per_hour = total_steps / estimated_hours
        self.start_hour = floor_hour(start or clock.now())

    def allowed(self, now: datetime) -> int:
        """Steps of this stretch that may have run by ``now``."""
        hours = int((floor_hour(now) - self.start_hour) / HOUR)
        return math.floor(self.steps_per_hour * (hours + 1) + 1e-9)

    def may_step(self, steps_done: int) -> bool:
        return steps_done < self.allowed(self.clock.now())

    def wait_seconds(self) -> float:
        """Real seconds until the next simulated hour, when a new budget opens."""
        now = self.clock.now()
        return self.clock.wall_seconds(floor_hour(now) + HOUR - now)
