"""The port a run reaches its device through. Which device a run asks for, whether CUDA is present
and how the device is driven (waiting for its queue, freeing its cache, its random generator) are
hardware questions, answered by :mod:`metatune_trainer_agent.adapters.devices`; the domain only
places tensors on :attr:`Accelerator.device` and does the maths there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import torch

T = TypeVar("T")


class Accelerator(Protocol):
    @property
    def device(self) -> torch.device:
        """Where the run's tensors live (``cuda:<n>`` or ``cpu``)."""
        ...

    @property
    def native_bf16(self) -> bool:
        """Whether bf16 autocast runs natively here (a GPU that supports it; a CPU with
        AVX512-BF16 or AMX), so that ``precision="auto"`` may pick it."""
        ...

    def timed(self, work: Callable[[], T]) -> tuple[T, float]:
        """Run ``work`` and return its result with the seconds the device spent on it: the device's
        queue is drained before and after (CUDA runs asynchronously), so the time is the work's."""
        ...

    def release_memory(self) -> None:
        """Give back the device memory cached after an out-of-memory failure."""
        ...

    def rng_states(self) -> list[torch.Tensor]:
        """The device's random-generator state for a checkpoint (none on a CPU: torch's own)."""
        ...

    def restore_rng(self, states: list[torch.Tensor]) -> None:
        """Set the device's random generator back to ``states`` (from :meth:`rng_states`)."""
        ...
