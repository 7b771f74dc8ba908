"""The :class:`~..domain.distributed.Group` of a run across several devices, over
``torch.distributed``: NCCL between GPUs, gloo between CPU processes (torchrun's environment
says who is who)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..domain.distributed import SINGLE, Group


@dataclass(frozen=True)
class ProcessGroup:
    """Rank ``rank`` of ``world`` processes (``local_rank`` picks its device)."""

    rank: int
    world: int
    local_rank: int

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Group:
        """The group torchrun describes in the environment ``env`` (the process's: ``os.environ``);
        :data:`~..domain.distributed.SINGLE` outside torchrun."""
        world = int(env.get("WORLD_SIZE", "1"))
        if world <= 1:
            return SINGLE
        return cls(
            rank=int(env["RANK"]), world=world, local_rank=int(env.get("LOCAL_RANK", env["RANK"]))
        )

    def join(self, device: torch.device) -> None:
        """Join the process group: NCCL between GPUs, gloo between CPU processes."""
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")

    def leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def shard(self, indices: Sequence[int]) -> list[int]:
        return list(indices[self.rank :: self.world])

    def from_leader(self, value: Any) -> Any:
        box = [value if self.leader else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def total(self, values: Sequence[float]) -> list[float]:
        nccl = dist.get_backend() == "nccl"
        on = torch.device("cuda", torch.cuda.current_device()) if nccl else None
        tensor = torch.tensor(list(values), dtype=torch.float64, device=on)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return [float(v) for v in tensor.tolist()]

    def parallel(self, model: nn.Module) -> nn.Module:
        # buffers (position ids) never change: no broadcast before each forward
        return DistributedDataParallel(model, broadcast_buffers=False)

    def accumulating(self, module: nn.Module) -> AbstractContextManager[object]:
        if isinstance(module, DistributedDataParallel):
            return module.no_sync()
        return nullcontext()
