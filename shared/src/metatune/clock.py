"""Time for every service: the wall clock in production, a simulated clock for demos and studies.

No service calls ``datetime.now()``: they hold a :class:`Clock`. The simulated clock is defined
by a :class:`~metatune.contracts.ClockAnchor` shared through the NATS KV bucket ``metatune_clock``
(see :mod:`metatune.bus.clock`), so every process computes the same simulated time, and
hourly :class:`~metatune.contracts.ClockTick` events on ``metatune.clock.tick`` tell services
that a new hour began.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime, timedelta

from .contracts import ClockAnchor

HOUR = timedelta(hours=1)


def floor_hour(value: datetime) -> datetime:
    return value.replace(minute=0, second=0, microsecond=0)


class Clock(ABC):
    simulated: bool

    @abstractmethod
    def now(self) -> datetime:
        """Current (possibly simulated) time, timezone-aware UTC."""

    @abstractmethod
    def wall_seconds(self, duration: timedelta) -> float:
        """Real seconds that ``duration`` of this clock's time takes."""

    def current_hour(self) -> datetime:
        return floor_hour(self.now())

    def next_hour(self) -> datetime:
        return self.current_hour() + HOUR

    async def sleep_until(self, moment: datetime) -> None:
        remaining = moment - self.now()
        if remaining > timedelta(0):
            await asyncio.sleep(self.wall_seconds(remaining))


class RealClock(Clock):
    simulated = False

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wall_seconds(self, duration: timedelta) -> float:
        return duration.total_seconds()


class SimulatedClock(Clock):
    """An hour passes in ``anchor.seconds_per_hour`` real seconds."""

    simulated = True

    def __init__(self, anchor: ClockAnchor) -> None:
        self.anchor = anchor
        self._speed = 3600.0 / anchor.seconds_per_hour

    def now(self) -> datetime:
        elapsed = (time.time() - self.anchor.wall_start) * self._speed
        return self.anchor.sim_start + timedelta(seconds=elapsed)

    def wall_seconds(self, duration: timedelta) -> float:
        return duration.total_seconds() / self._speed


class FixedClock(Clock):
    """A clock that moves only when told to: for pure domain tests and what-if studies."""

    simulated = True

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FixedClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, duration: timedelta) -> None:
        self._now += duration

    def wall_seconds(self, duration: timedelta) -> float:
        return 0.0


def new_anchor(seconds_per_hour: float, sim_start: datetime | None = None) -> ClockAnchor:
    """Anchor a new simulation at ``sim_start`` (default: the current real hour)."""
    start = sim_start or floor_hour(datetime.now(UTC))
    return ClockAnchor(sim_start=start, wall_start=time.time(), seconds_per_hour=seconds_per_hour)
