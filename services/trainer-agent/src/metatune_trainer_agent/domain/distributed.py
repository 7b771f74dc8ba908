"""The process group of a run trained across several devices (PyTorch DDP under torchrun).

A run on ``n`` devices is ``n`` processes, one per device, that torchrun starts and that find
each other through its environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_*``).
Every process walks the single-device code path of :mod:`.run`; :class:`Group` is what they
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

Joining the group and talking over it is I/O: :class:`Group` is a port, implemented over
``torch.distributed`` by :class:`metatune_trainer_agent.adapters.process_group.ProcessGroup`.
A single-process run uses :data:`SINGLE`, whose operations are the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from torch import nn


class Group(Protocol):
    """This process's place in the run: ``rank`` of ``world`` (``local_rank`` picks its device)."""

    @property
    def rank(self) -> int: ...

    @property
    def world(self) -> int: ...

    @property
    def local_rank(self) -> int: ...

    @property
    def leader(self) -> bool: ...

    @property
    def distributed(self) -> bool: ...

    def shard(self, indices: Sequence[int]) -> list[int]:
        """This rank's slice of a micro-batch (rank ``r`` takes every ``world``-th example from ``r``)."""
        ...

    def from_leader(self, value: Any) -> Any:
        """The leader's ``value`` on every rank (any picklable object)."""
        ...

    def total(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums of ``values`` over the ranks."""
        ...

    def parallel(self, model: nn.Module) -> nn.Module:
        """The module an optimizer steps through: ``model`` whose gradients are averaged over
        the ranks (DDP), or ``model`` itself in one process."""
        ...

    def accumulating(self, module: nn.Module) -> AbstractContextManager[object]:
        """A context for a micro-batch that is not the step's last: no gradient exchange yet."""
        ...


@dataclass(frozen=True)
class Single:
    """One process on one device: every operation over the group is the identity."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    leader: bool = True
    distributed: bool = False

    def shard(self, indices: Sequence[int]) -> list[int]:
        return list(indices)

    def from_leader(self, value: Any) -> Any:
        return value

    def total(self, values: Sequence[float]) -> list[float]:
        return list(values)

    def parallel(self, model: nn.Module) -> nn.Module:
        return model

    def accumulating(self, module: nn.Module) -> AbstractContextManager[object]:
        return nullcontext()


SINGLE: Group = Single()
