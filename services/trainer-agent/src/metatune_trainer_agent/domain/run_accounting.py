"""A run's account: energy above idle, its carbon at each lap's intensity, tokens and hours; this
session's laps on top of what the run's checkpoint carried."""

from __future__ import annotations

import time
from datetime import datetime

from metatune.clock import Clock
from metatune.contracts import RunAccounting

from .carbon import CarbonLedger, IntensityLookup
from .checkpoint import Accumulated
from .distributed import Group
from .energy import EnergyMeter, Lap
from .run_types import Site


class RunAccountant:
    """Charges each lap's energy to the ledger and sums the run so far. ``started`` (monotonic)
    and ``lap_at`` (clock time) are when the session's account opened: before its data and model
    load, so the start-up is charged too."""

    def __init__(
        self,
        meter: EnergyMeter,
        accumulated: Accumulated,
        site: Site,
        clock: Clock,
        intensity: IntensityLookup,
        group: Group,
        *,
        started: float,
        lap_at: datetime,
    ) -> None:
        self.meter = meter
        self.accumulated = accumulated
        self.site = site
        self.clock = clock
        self.intensity = intensity
        self.group = group
        self.ledger = CarbonLedger.from_state(accumulated.ledger, site.datacenter, site.pue)
        self.started = started
        self.lap_at = lap_at
        self.tokens = 0  # this session's
        self.padded = 0

    def lap(self, busy_seconds: float | None = None) -> Lap:
        """This process's lap; across processes, every device's energy and power together (a
        machine-wide counter, RAPL, is read by the leader alone)."""
        lap = self.meter.lap(busy_seconds=busy_seconds)
        if not self.group.distributed:
            return lap
        counted = self.group.leader or not self.meter.machine_wide
        energy_wh, power_w = self.group.total(
            [lap.energy_wh, lap.power_w] if counted else [0.0, 0.0]
        )
        return Lap(seconds=lap.seconds, energy_wh=energy_wh, power_w=power_w)

    def charge(self, energy_wh: float) -> None:
        now = self.clock.now()
        self.ledger.add(self.lap_at, now, energy_wh, self.intensity)
        self.lap_at = now

    def charged_lap(self, busy_seconds: float | None = None) -> Lap:
        """:meth:`lap`, its energy charged."""
        lap = self.lap(busy_seconds)
        self.charge(lap.energy_wh)
        return lap

    def add_tokens(self, tokens: int, with_padding: int) -> None:
        self.tokens += tokens
        self.padded += with_padding

    def session_seconds(self) -> float:
        return time.monotonic() - self.started

    def accounting(self) -> RunAccounting:
        self.ledger.reprice(self.intensity)
        wall = self.accumulated.wall_seconds + self.session_seconds()
        return RunAccounting(
            tokens_seen=self.accumulated.tokens + self.tokens,
            tokens_with_padding=self.accumulated.tokens_with_padding + self.padded,
            energy_wh=self.ledger.energy_wh,
            emissions_g=self.ledger.emissions_g,
            gpu_hours=self.accumulated.gpu_hours + self.session_seconds() * self.site.gpus / 3600.0,
            wall_seconds=wall,
            hours=self.ledger.hours(),
            idle_power_w=self.meter.idle_w,
            power_source=self.meter.source,
        )

    def carried(self) -> Accumulated:
        """What a checkpoint carries of the account, for the session that resumes it."""
        accounting = self.accounting()
        return Accumulated(
            tokens=accounting.tokens_seen,
            tokens_with_padding=accounting.tokens_with_padding,
            wall_seconds=accounting.wall_seconds,
            gpu_hours=accounting.gpu_hours,
            ledger=self.ledger.to_state(),
        )
