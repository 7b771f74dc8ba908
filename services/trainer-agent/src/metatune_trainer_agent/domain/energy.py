"""Energy meters: what the hardware draws above idle while a run trains.

Sources, best first:

* ``nvml``: the GPU's own energy counter (``nvmlDeviceGetTotalEnergyConsumption``, Volta and
  later), or its power reading integrated between reads on older boards.
* ``rapl``: Intel/AMD RAPL package counters under ``/sys/class/powercap`` (CPU runs, where readable).
* ``model``: a documented TDP x utilisation model when neither is readable. CPU: watts per core
  x cores kept busy by this process (process CPU seconds / wall seconds); the default 12 W per
  core is the Green Algorithms default (Lannelongue et al., 2021). GPU: board power x the time
  spent in training steps (utilisation 1 while stepping: an upper bound).

Every meter subtracts an idle baseline measured before the run (the counter's rate with nothing
training: :func:`~metatune_trainer_agent.adapters.energy_counters.idle_watts` waits between two
readings), so a run is charged for what it adds, not for the machine
being on. Hardware counters see the whole device: on a shared machine, other load counts too.
The counters that read the hardware (NVML, RAPL, this process's CPU time) are in
:mod:`metatune_trainer_agent.adapters.energy_counters`; the meter and the GPU model are here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

JOULES_PER_WH = 3600.0
DEFAULT_WATTS_PER_CORE = 12.0


class EnergyCounter(Protocol):
    """A cumulative energy counter in joules (monotonic between two reads of one run)."""

    source: str

    def joules(self) -> float: ...

    def add_busy(self, seconds: float) -> None:
        """Time spent in training steps (used by models that need it; hardware counters ignore it)."""


class GpuModelCounter:
    """Board power x seconds spent in training steps."""

    source = "model"

    def __init__(self, board_power_w: float) -> None:
        self.board_power_w = board_power_w
        self._busy = 0.0

    def joules(self) -> float:
        return self._busy * self.board_power_w

    def add_busy(self, seconds: float) -> None:
        self._busy += seconds


@dataclass(frozen=True)
class Lap:
    seconds: float
    energy_wh: float  # above idle
    power_w: float  # mean power above idle over the lap


class EnergyMeter:
    """Laps of energy above the idle baseline, from one counter."""

    def __init__(self, counter: EnergyCounter, *, idle_w: float = 0.0) -> None:
        self.counter = counter
        self.idle_w = idle_w
        self._t = time.monotonic()
        self._j = counter.joules()

    @property
    def source(self) -> str:
        return self.counter.source

    @property
    def machine_wide(self) -> bool:
        """True when the counter reads the whole machine (RAPL packages), not this process or device."""
        return self.counter.source == "rapl"

    def reset(self) -> None:
        self._t, self._j = time.monotonic(), self.counter.joules()

    def lap(self, busy_seconds: float | None = None) -> Lap:
        """Energy since the previous lap; ``busy_seconds`` (time in steps) feeds utilisation models."""
        now = time.monotonic()
        seconds = max(now - self._t, 1e-9)
        self.counter.add_busy(seconds if busy_seconds is None else busy_seconds)
        joules = self.counter.joules()
        above_idle = max(0.0, (joules - self._j) - self.idle_w * seconds)
        self._t, self._j = now, joules
        return Lap(
            seconds=seconds, energy_wh=above_idle / JOULES_PER_WH, power_w=above_idle / seconds
        )
