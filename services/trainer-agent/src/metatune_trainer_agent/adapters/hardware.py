"""What this agent trains on, as its heartbeat reports it: CUDA GPUs (torch.cuda for the devices the
process may use, NVML through nvidia-ml-py for the driver's view: model, memory, energy counter),
else the CPU.

NVML is reached here only (and by the energy meter's counter, :mod:`.energy_counters`): where it is
missing (the CPU image, no NVIDIA driver, a container not given a GPU) :func:`nvml_status` answers
``available=False`` with the reason instead of raising, so a CPU agent reports its CPU and goes on.
"""

from __future__ import annotations

import contextlib
import importlib
import platform
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

MIB = 1024 * 1024


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``, else the platform's processor string)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


@dataclass(frozen=True)
class NvmlGpu:
    name: str
    memory_mib: int
    energy_counter: bool  # nvmlDeviceGetTotalEnergyConsumption answers (Volta and later)


@dataclass(frozen=True)
class NvmlStatus:
    available: bool
    reason: str | None = None  # why not, when unavailable
    gpus: tuple[NvmlGpu, ...] = ()


@dataclass(frozen=True)
class Hardware:
    device: str  # "cuda" or "cpu"
    gpus: int  # CUDA devices this process may use (0 on a CPU)
    model: str  # the first GPU's name, else the CPU's model
    memory_mib: int | None  # per GPU; None on a CPU
    nvml: NvmlStatus


def nvml_status(module: ModuleType | None = None) -> NvmlStatus:
    """The GPUs the NVIDIA driver reports, or why it cannot be asked (never raises). ``module``:
    the NVML binding (pynvml by default)."""
    nvml: Any = module
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return NvmlStatus(False, "nvidia-ml-py is not installed")
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, _NoPermission, ...
        return NvmlStatus(False, f"NVML unavailable: {_reason(exc)}")
    try:
        gpus = tuple(
            _gpu(nvml, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())
        )
    except Exception as exc:
        return NvmlStatus(False, f"NVML failed: {_reason(exc)}")
    finally:
        with contextlib.suppress(Exception):  # already shut down: nothing to release
            nvml.nvmlShutdown()
    if not gpus:
        return NvmlStatus(False, "NVML reports no GPU")
    return NvmlStatus(True, None, gpus)


def detect() -> Hardware:
    """The hardware this process trains on (torch decides the device, as training does)."""
    import torch

    status = nvml_status()
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        props = torch.cuda.get_device_properties(0)
        return Hardware(
            "cuda", torch.cuda.device_count(), props.name, props.total_memory // MIB, status
        )
    return Hardware("cpu", 0, cpu_model() or platform.machine() or "cpu", None, status)


def _gpu(nvml: Any, handle: Any) -> NvmlGpu:  # pynvml is untyped: handles are opaque
    name = nvml.nvmlDeviceGetName(handle)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle).total
    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        energy = True
    except Exception:  # NVMLError_NotSupported on boards before Volta
        energy = False
    return NvmlGpu(
        name.decode() if isinstance(name, bytes) else str(name), int(memory) // MIB, energy
    )


def _reason(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__
