"""The process group of a run trained across several devices (PyTorch DDP under torchrun).

A run on ``n`` devices is ``n`` processes, one per device, that torchrun starts and that find
each other through its environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_*``).
Every process walks the single-device code path of :mod:`.run`; this module holds what they
share:

* each optimizer step's global batch is the one a single process would draw; every rank takes
  its slice of each micro-batch (:meth:`Group.shard`) and DDP averages the gradients, so the
  data order, the checkpoint and the resume position do not depend on the number of processes
  (a run paused on two devices resumes on one, or on four);
* rank 0 (the *leader*) talks to the caller: it alone reads the pause / stop control, asks the
  early-stop hook, publishes progress and writes checkpoints and the adapter; its decisions
  reach the other ranks by broadcast, so every rank leaves the loop at the same step;
* losses, tokens and energy are reduced over the ranks, so the run reports what all of its
  devices did.

A single-process run uses :data:`SINGLE`, whose operations are the identity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Group:
    """This process's place in the run: ``rank`` of ``world`` (``local_rank`` picks its device)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Group:
        """The group torchrun describes in the environment ``env`` (the process's: ``os.environ``);
        :data:`SINGLE` outside torchrun."""
        world = int(env.get("WORLD_SIZE", "1"))
        if world <= 1:
            return SINGLE
        return cls(
            rank=int(env["RANK"]), world=world, local_rank=int(env.get("LOCAL_RANK", env["RANK"]))
        )

    def join(self, device: torch.device) -> None:
        """Join the process group: NCCL between GPUs, gloo between CPU processes."""
        if self.distributed and not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")

    def leave(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()

    def shard(self, indices: Sequence[int]) -> list[int]:
        """This rank's slice of a micro-batch (rank ``r`` takes every ``world``-th example from ``r``)."""
        return list(indices[self.rank :: self.world])

    def from_leader(self, value: Any) -> Any:
        """The leader's ``value`` on every rank (any picklable object)."""
        if not self.distributed:
            return value
        box = [value if self.leader else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def total(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums of ``values`` over the ranks."""
        if not self.distributed:
            return list(values)
        on = torch.device("cuda", torch.cuda.current_device()) if _nccl() else None
        tensor = torch.tensor(list(values), dtype=torch.float64, device=on)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return [float(v) for v in tensor.tolist()]


def _nccl() -> bool:
    return bool(dist.get_backend() == "nccl")


SINGLE = Group()
