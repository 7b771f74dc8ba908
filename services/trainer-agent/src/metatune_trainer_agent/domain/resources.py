"""The port a training run reaches the world through: the dataset file, the base model and its
tokenizer, the tokenization cache, the device and its energy counter, waiting (an idle baseline,
the pacer's budget), and the bytes of checkpoints and adapters.
:class:`metatune_trainer_agent.adapters.training.LocalResources` implements it on this machine;
the run itself (:class:`~.run.TrainingRun`) only decides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from metatune.contracts import LoraConfig, TaskType

from .checkpoint import Checkpoint
from .device import Accelerator
from .encoding import EncodedDataset
from .energy import EnergyCounter
from .pacing import StepPacer
from .request import TrainingRequest
from .run_types import Control


class RunResources(Protocol):
    def dataset_exists(self, path: Path) -> bool: ...

    def load_tokenizer(self, base_model: str) -> tuple[Any, str]:
        """The tokenizer (with a pad token) and where the model loads from."""
        ...

    def encode(self, request: TrainingRequest, tokenizer: Any) -> EncodedDataset:
        """The request's dataset tokenized (from the cache when it holds it)."""
        ...

    def load_model(
        self, source: str, task: TaskType, config: LoraConfig, *, num_labels: int, pad_token_id: int
    ) -> nn.Module:
        """The base model wrapped in a fresh LoRA adapter (called under a seeded RNG)."""
        ...

    def open_device(self, name: str, local_rank: int | None) -> Accelerator:
        """The device the option ``name`` names (``auto``: CUDA when present); ``local_rank``
        (a rank of a run across several devices) picks that process's GPU."""
        ...

    def energy_counter(
        self, device: torch.device, *, gpu_power_w: float, watts_per_core: float
    ) -> EnergyCounter: ...

    def idle_watts(self, counter: EnergyCounter, seconds: float) -> float:
        """The counter's rate over ``seconds`` with nothing training (the port waits)."""
        ...

    def wait_for_budget(
        self, pacer: StepPacer, steps_done: int, control: Callable[[], Control | None]
    ) -> Control | None:
        """Wait until ``pacer`` lets a stretch that has run ``steps_done`` steps take another, or
        ``control`` answers (checked between short naps: a pause must not wait an hour)."""
        ...

    def read_checkpoint(self, data: bytes, *, expect_fingerprint: str) -> Checkpoint: ...

    def write_checkpoint(self, checkpoint: Checkpoint) -> bytes: ...

    def pack_adapter(self, model: nn.Module, metadata: dict[str, Any]) -> bytes:
        """The trained adapter as one archive with its ``metadata``."""
        ...
