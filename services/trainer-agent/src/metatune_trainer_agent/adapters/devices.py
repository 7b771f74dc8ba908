"""The device a run computes on (:class:`~..domain.device.Accelerator`): which one a request's
``device`` option names (``auto``: CUDA when present), and the calls that drive it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from ..domain.errors import InvalidTrainingConfig

T = TypeVar("T")


def device_for(name: str) -> torch.device:
    """The device ``name`` names (``auto``: CUDA when present, else the CPU); a CUDA device
    asked for where none is present is refused."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidTrainingConfig(f"device {name!r} requested but no CUDA device is present")
    return device


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bf16 natively (AVX512-BF16 or AMX tiles)."""
    cpu = torch.cpu
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


@dataclass(frozen=True)
class LocalDevice:
    """A CUDA device or the CPU of this machine."""

    device: torch.device

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def native_bf16(self) -> bool:
        return bool(torch.cuda.is_bf16_supported()) if self.cuda else cpu_has_native_bf16()

    def timed(self, work: Callable[[], T]) -> tuple[T, float]:
        self._drain()
        started = time.perf_counter()
        result = work()
        self._drain()
        return result, time.perf_counter() - started

    def _drain(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def release_memory(self) -> None:
        if self.cuda:
            torch.cuda.empty_cache()

    def rng_states(self) -> list[torch.Tensor]:
        return [torch.cuda.get_rng_state(self.device)] if self.cuda else []

    def restore_rng(self, states: list[torch.Tensor]) -> None:
        if self.cuda and states:
            torch.cuda.set_rng_state(states[0], self.device)


def open_device(name: str, local_rank: int | None = None) -> LocalDevice:
    """The device ``name`` names; ``local_rank`` (a rank of a run across several devices) takes
    that CUDA device and makes it the process's current one."""
    device = device_for(name)
    if local_rank is not None and device.type == "cuda":
        device = torch.device("cuda", local_rank)  # one device per process
        torch.cuda.set_device(device)
    return LocalDevice(device)
