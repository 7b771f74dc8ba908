"""Simulated-clock contracts: the shared anchor and the hourly tick."""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from .base import Contract, Event


class ClockAnchor(Contract):
    """Simulated time = sim_start + (wall - wall_start) x 3600 / seconds_per_hour."""

    sim_start: AwareDatetime
    wall_start: float = Field(description="Unix time at which sim_start was simulated time")
    seconds_per_hour: float = Field(gt=0)


class ClockTick(Event):
    hour: AwareDatetime = Field(description="the (simulated or real) hour that just began")
    simulated: bool = Field(description="true when the platform runs on the simulated clock")
