"""A training run on this machine: :func:`run_training` runs the domain's
:class:`~..domain.run.TrainingRun` with :class:`LocalResources`, its port to the files, the model
hub (or the embedded models), the device and its energy counters and the wall clock's waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from torch import nn

from metatune.clock import Clock, RealClock
from metatune.contracts import LoraConfig, TaskType

from ..domain.carbon import IntensityLookup, no_intensity
from ..domain.checkpoint import Checkpoint
from ..domain.distributed import SINGLE, Group
from ..domain.encoding import EncodedDataset
from ..domain.energy import EnergyCounter
from ..domain.pacing import StepPacer
from ..domain.request import TrainingRequest
from ..domain.run import RunHooks, RunOutcome, Site, TrainingRun
from ..domain.run_types import Control
from .adapter_archive import pack_adapter
from .base_model import load_model, load_tokenizer
from .checkpoint_bytes import checkpoint_from_bytes, checkpoint_to_bytes
from .devices import LocalDevice, open_device
from .encoding_cache import encode_dataset
from .energy_counters import detect_counter, idle_watts

# the pacer's naps: checked at least this often, never longer (a pause must not wait an hour)
PACER_POLL_S = 0.05
PACER_NAP_S = 0.5


class LocalResources:
    """:class:`~..domain.resources.RunResources` on this machine."""

    def dataset_exists(self, path: Path) -> bool:
        return path.is_file()

    def load_tokenizer(self, base_model: str) -> tuple[Any, str]:
        return load_tokenizer(base_model)

    def encode(self, request: TrainingRequest, tokenizer: Any) -> EncodedDataset:
        return encode_dataset(request, tokenizer)

    def load_model(
        self, source: str, task: TaskType, config: LoraConfig, *, num_labels: int, pad_token_id: int
    ) -> nn.Module:
        return load_model(source, task, config, num_labels=num_labels, pad_token_id=pad_token_id)

    def open_device(self, name: str, local_rank: int | None) -> LocalDevice:
        return open_device(name, local_rank)

    def energy_counter(
        self, device: torch.device, *, gpu_power_w: float, watts_per_core: float
    ) -> EnergyCounter:
        return detect_counter(device, gpu_power_w=gpu_power_w, watts_per_core=watts_per_core)

    def idle_watts(self, counter: EnergyCounter, seconds: float) -> float:
        return idle_watts(counter, seconds)

    def wait_for_budget(
        self, pacer: StepPacer, steps_done: int, control: Callable[[], Control | None]
    ) -> Control | None:
        while True:
            answer = control()
            if answer is not None or pacer.may_step(steps_done):
                return answer
            time.sleep(min(max(pacer.wait_seconds(), PACER_POLL_S), PACER_NAP_S))

    def read_checkpoint(self, data: bytes, *, expect_fingerprint: str) -> Checkpoint:
        return checkpoint_from_bytes(data, expect_fingerprint=expect_fingerprint)

    def write_checkpoint(self, checkpoint: Checkpoint) -> bytes:
        return checkpoint_to_bytes(checkpoint)

    def pack_adapter(self, model: nn.Module, metadata: dict[str, Any]) -> bytes:
        return pack_adapter(model, metadata)


LOCAL = LocalResources()
HOME = Site()  # the default site: local, PUE 1, one device


def run_training(
    request: TrainingRequest,
    *,
    site: Site = HOME,
    clock: Clock | None = None,
    intensity: IntensityLookup = no_intensity,
    hooks: RunHooks | None = None,
    resume_from: bytes | None = None,
    planned_hours: float | None = None,
    taken_up: tuple[datetime, float] | None = None,
    group: Group = SINGLE,
) -> RunOutcome:
    """Train until done, early-stopped, paused or stopped.

    ``planned_hours`` (wall hours the scheduler estimated for the whole job) paces the steps
    when ``clock`` is simulated; ``resume_from`` continues a checkpoint exactly;
    ``taken_up`` (clock time, ``time.monotonic()``) is when the caller took up the run, so that
    the start-up reported includes fetching data and checkpoint (default: when this is called).
    ``group`` is this process's place in a run across several devices (see :mod:`..domain.distributed`):
    every rank calls this with the same request and checkpoint; only the leader's hooks are
    called and only its outcome carries the checkpoint and the adapter.
    """
    return TrainingRun(
        request,
        site,
        clock or RealClock(),
        intensity,
        hooks or RunHooks(),
        planned_hours,
        group,
        LOCAL,
    ).execute(resume_from, taken_up)
