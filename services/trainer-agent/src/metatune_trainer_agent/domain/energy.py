"""Energy meters: what the hardware draws above idle while a run trains.

Sources, best first:

* ``nvml``: the GPU's own energy counter (``nvmlDeviceGetTotalEnergyConsumption``, Volta and
  later), or its power reading integrated between reads on older boards.
* ``rapl``: Intel/AMD RAPL package counters under ``/sys/class/powercap`` (CPU runs, where readable).
* ``model``: a documented TDP x utilisation model when neither is readable. CPU: watts per core
  x cores kept busy by this process (process CPU seconds / wall seconds); the default 12 W per
  core is the Green Algorithms default (Lannelongue et al., 2021). GPU: board power x the time
  spent in training steps (utilisation 1 while stepping: an upper bound).

Every meter measures an idle baseline before the run (the counter's rate with nothing
training) and subtracts it, so a run is charged for what it adds, not for the machine
being on. Hardware counters see the whole device: on a shared machine, other load counts too.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

JOULES_PER_WH = 3600.0
DEFAULT_WATTS_PER_CORE = 12.0
POWERCAP = Path("/sys/class/powercap")


class EnergyCounter(Protocol):
    """A cumulative energy counter in joules (monotonic between two reads of one run)."""

    source: str

    def joules(self) -> float: ...

    def add_busy(self, seconds: float) -> None:
        """Time spent in training steps (used by models that need it; hardware counters ignore it)."""


class NvmlCounter:
    source = "nvml"

    def __init__(self, device_index: int) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = _nvml_handle(pynvml, device_index)
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            self._has_energy = True
        except pynvml.NVMLError:
            self._has_energy = False
        self._last_t = time.monotonic()
        self._last_w = self._power_w()
        self._integrated = 0.0

    def _power_w(self) -> float:
        return float(self._nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1000.0

    def joules(self) -> float:
        if self._has_energy:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1000.0
        now, watts = time.monotonic(), self._power_w()
        self._integrated += (now - self._last_t) * (watts + self._last_w) / 2  # trapezoid
        self._last_t, self._last_w = now, watts
        return self._integrated

    def add_busy(self, seconds: float) -> None:
        pass


class RaplCounter:
    source = "rapl"

    def __init__(self, root: Path = POWERCAP) -> None:
        self._zones = rapl_package_zones(root)
        if not self._zones:
            raise OSError(f"no readable RAPL package zone under {root}")
        self._ranges = [int((zone / "max_energy_range_uj").read_text()) for zone in self._zones]
        self._last = [self._read(zone) for zone in self._zones]
        self._total_uj = 0

    @staticmethod
    def _read(zone: Path) -> int:
        return int((zone / "energy_uj").read_text())

    def joules(self) -> float:
        for k, zone in enumerate(self._zones):
            value = self._read(zone)
            delta = value - self._last[k]
            if delta < 0:  # the counter wrapped
                delta += self._ranges[k]
            self._total_uj += delta
            self._last[k] = value
        return self._total_uj / 1e6

    def add_busy(self, seconds: float) -> None:
        pass


class CpuModelCounter:
    """Watts per core x process CPU seconds (all threads of this process)."""

    source = "model"

    def __init__(self, watts_per_core: float = DEFAULT_WATTS_PER_CORE) -> None:
        self.watts_per_core = watts_per_core

    def joules(self) -> float:
        times = os.times()
        return (times.user + times.system) * self.watts_per_core

    def add_busy(self, seconds: float) -> None:
        pass


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


def rapl_package_zones(root: Path = POWERCAP) -> list[Path]:
    """Top-level RAPL zones (packages; sub-zones such as core/dram are inside them) that we may read."""
    if not root.is_dir():
        return []
    zones = []
    for zone in sorted(root.glob("intel-rapl:*")):
        if zone.name.count(":") != 1:
            continue
        try:
            int((zone / "energy_uj").read_text())
            int((zone / "max_energy_range_uj").read_text())
        except (OSError, ValueError):
            continue
        zones.append(zone)
    return zones


def detect_counter(
    device: torch.device, *, gpu_power_w: float, watts_per_core: float = DEFAULT_WATTS_PER_CORE
) -> EnergyCounter:
    """The best counter this machine offers for ``device``."""
    if device.type == "cuda":
        try:
            return NvmlCounter(
                device.index if device.index is not None else torch.cuda.current_device()
            )
        except Exception:  # no driver library, no permission, unsupported board
            return GpuModelCounter(gpu_power_w)
    try:
        return RaplCounter()
    except (OSError, ValueError):
        return CpuModelCounter(watts_per_core)


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

    def measure_idle(self, seconds: float) -> float:
        """Sample the counter with nothing training; the rate becomes the baseline subtracted."""
        t0, j0 = time.monotonic(), self.counter.joules()
        time.sleep(seconds)
        t1, j1 = time.monotonic(), self.counter.joules()
        self.idle_w = max(0.0, (j1 - j0) / max(t1 - t0, 1e-9))
        self.reset()
        return self.idle_w

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


def _nvml_handle(pynvml: Any, device_index: int) -> Any:  # pynvml is untyped: handles are opaque
    """The NVML handle of a torch device (matched by PCI bus id: CUDA_VISIBLE_DEVICES reorders indices)."""
    try:
        props = torch.cuda.get_device_properties(device_index)
        # torch's stubs lack the PCI fields its device properties have at run time (torch >= 2.4)
        domain, bus, device = (
            getattr(props, f"pci_{part}_id") for part in ("domain", "bus", "device")
        )
        bus_id = f"{domain:08x}:{bus:02x}:{device:02x}.0"
        return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
    except Exception:
        return pynvml.nvmlDeviceGetHandleByIndex(device_index)
