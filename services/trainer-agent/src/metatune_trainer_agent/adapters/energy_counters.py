"""The energy counters that read the hardware: NVML (the GPU's energy counter or power reading),
RAPL package counters under ``/sys/class/powercap``, and this process's CPU time x watts per core;
:func:`detect_counter` picks the best this machine offers (see :mod:`..domain.energy`)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch

from ..domain.energy import DEFAULT_WATTS_PER_CORE, EnergyCounter, GpuModelCounter

POWERCAP = Path("/sys/class/powercap")


class NvmlCounter:
    source = "nvml"

    def __init__(self, device_index: int, *, energy_counter: bool = True) -> None:
        """``energy_counter=False``: integrate the power reading even where the board counts
        energy (bench/gpu_check.py compares the two)."""
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = _nvml_handle(pynvml, device_index)
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            self.has_energy_counter = energy_counter
        except pynvml.NVMLError:
            self.has_energy_counter = False
        self._last_t = time.monotonic()
        self._last_w = self._power_w()
        self._integrated = 0.0

    def _power_w(self) -> float:
        return float(self._nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1000.0

    def joules(self) -> float:
        if self.has_energy_counter:
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


def idle_watts(counter: EnergyCounter, seconds: float) -> float:
    """The counter's rate over ``seconds`` with nothing training (this call waits): the baseline
    an :class:`~..domain.energy.EnergyMeter` subtracts."""
    t0, j0 = time.monotonic(), counter.joules()
    time.sleep(seconds)
    t1, j1 = time.monotonic(), counter.joules()
    return max(0.0, (j1 - j0) / max(t1 - t0, 1e-9))


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
