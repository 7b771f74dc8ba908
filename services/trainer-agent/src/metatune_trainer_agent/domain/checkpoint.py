"""Checkpoints as bytes: everything needed to continue a run exactly, on any agent.

Adapter weights (LoRA and the newly initialised heads), optimizer, LR scheduler, grad scaler,
RNG states (CPU and every CUDA device), the data position (epoch, batch), the early-stopping
history, the periodic evaluations (so a resumed run's learning-curve stopper sees its whole
curve; absent in older checkpoints, read as none) and the accounting so far. Turned into bytes
by :mod:`metatune_trainer_agent.adapters.checkpoint_bytes` (``torch.save``, read back with
``weights_only=True``, so loading a checkpoint never runs code from it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import CheckpointMismatch

FORMAT = 1


@dataclass
class Position:
    """Where the run is: optimizer steps done, and the next micro-batch of the epoch's plan."""

    step: int = 0
    epoch: int = 0
    batch: int = 0


@dataclass
class Accumulated:
    """What the run spent before this process took it over."""

    tokens: int = 0
    tokens_with_padding: int = 0
    wall_seconds: float = 0.0
    gpu_hours: float = 0.0
    ledger: list[list[Any]] = field(default_factory=list)


@dataclass
class Checkpoint:
    fingerprint: str
    position: Position
    micro_batch: int
    grad_accum: int
    total_steps: int
    adapter: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    scaler: dict[str, Any] | None
    rng_cpu: torch.Tensor
    rng_cuda: list[torch.Tensor]
    plateau: list[float]
    accumulated: Accumulated
    last_train_loss: float | None = None
    # periodic evaluations so far: (step, {"loss": ..., "accuracy": ..., ...}), step 0 first
    evaluations: list[tuple[int, dict[str, float | None]]] = field(default_factory=list)

    def to_state(self) -> dict[str, Any]:
        """Tensors and plain values only, so that ``torch.load(weights_only=True)`` reads them."""
        return {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "position": vars(self.position),
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
            "total_steps": self.total_steps,
            "adapter": {k: v.detach().cpu() for k, v in self.adapter.items()},
            "optimizer": self.optimizer,
            "scheduler": self.scheduler,
            "scaler": self.scaler,
            "rng_cpu": self.rng_cpu,
            "rng_cuda": self.rng_cuda,
            "plateau": list(self.plateau),
            "accumulated": vars(self.accumulated),
            "last_train_loss": self.last_train_loss,
            "evaluations": [[int(step), dict(values)] for step, values in self.evaluations],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], *, expect_fingerprint: str) -> Checkpoint:
        if state.get("format") != FORMAT:
            raise CheckpointMismatch(
                f"checkpoint format {state.get('format')!r}, this agent reads {FORMAT}"
            )
        if state["fingerprint"] != expect_fingerprint:
            raise CheckpointMismatch(
                "the checkpoint belongs to another configuration, model or dataset"
            )
        return cls(
            fingerprint=state["fingerprint"],
            position=Position(**state["position"]),
            micro_batch=int(state["micro_batch"]),
            grad_accum=int(state["grad_accum"]),
            total_steps=int(state["total_steps"]),
            adapter=state["adapter"],
            optimizer=state["optimizer"],
            scheduler=state["scheduler"],
            scaler=state["scaler"],
            rng_cpu=state["rng_cpu"],
            rng_cuda=list(state["rng_cuda"]),
            plateau=[float(v) for v in state["plateau"]],
            accumulated=Accumulated(**state["accumulated"]),
            last_train_loss=state.get("last_train_loss"),
            evaluations=[
                (int(step), dict(values)) for step, values in state.get("evaluations", [])
            ],
        )


def fingerprint(**parts: Any) -> str:
    """A digest of what must match for a checkpoint to continue a run (config, model, data shape)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
