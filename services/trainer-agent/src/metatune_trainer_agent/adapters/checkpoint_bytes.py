"""Checkpoints as bytes: ``torch.save`` of :meth:`~..domain.checkpoint.Checkpoint.to_state`, read
back with ``weights_only=True`` (loading a checkpoint never runs code from it) onto the CPU."""

from __future__ import annotations

import io

import torch

from ..domain.checkpoint import Checkpoint
from ..domain.errors import CheckpointMismatch


def checkpoint_to_bytes(checkpoint: Checkpoint) -> bytes:
    buffer = io.BytesIO()
    torch.save(checkpoint.to_state(), buffer)
    return buffer.getvalue()


def checkpoint_from_bytes(data: bytes, *, expect_fingerprint: str) -> Checkpoint:
    """The checkpoint in ``data``; a :class:`CheckpointMismatch` if it cannot be read or belongs to
    another configuration, model or dataset."""
    try:
        state = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:
        raise CheckpointMismatch(f"the checkpoint cannot be read: {exc}") from exc
    return Checkpoint.from_state(state, expect_fingerprint=expect_fingerprint)
