"""How much each transfer source speaks for a task: similarity first, then the task's own results.

Only history tasks of the task's search space take part (:meth:`.sources.TransferSources.shared_space`;
none: the learned mean alone). Their prior weights are by descriptor similarity, the learned mean
keeping ``own_weight`` (:func:`.scoring.similarity_weights`); from two results on, each source's
weight is multiplied by ``exp(-rank_temperature)`` per pair of the task's results it orders the
other way beyond the best source's count, as RGPE ranks its base models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .prior_settings import PriorSettings
from .scoring import similarity_weights
from .sources import TransferSources


def misordered_pairs(mu: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pairs of distinct results ``y`` (n,) that each source's predictions ``mu`` (sources, n)
    order the other way; shape (sources,)."""
    dy = np.sign(y[:, None] - y[None, :])
    upper = np.triu(np.ones(dy.shape, dtype=bool), 1) & (dy != 0)
    dm = np.sign(mu[:, :, None] - mu[:, None, :])
    return np.asarray(((dm != dy[None]) & upper[None]).sum(axis=(1, 2)))


class TaskWeighting:
    """The weighting rule of ``settings``: which sources, from how many results on
    (``transfer_after``, ``transfer_ei``), the learned mean's share and the rank temperature."""

    def __init__(self, settings: PriorSettings) -> None:
        self.transfer_after = settings.transfer_after
        self.transfer_ei = settings.transfer_ei
        self.own_weight = settings.own_weight
        self.rank_temperature = settings.rank_temperature

    def weights(
        self,
        sources: TransferSources,
        descriptors: Mapping[str, Any],
        x: torch.Tensor,
        y: np.ndarray,
        pool: torch.Tensor | None = None,
    ) -> np.ndarray | None:
        """The weights over ``sources`` (the history tasks, then the learned mean) of a task with
        these ``descriptors`` and results ``y`` at inputs ``x``, whose candidates are ``pool``;
        None: the learned mean alone."""
        if not sources.sources or len(y) < self.transfer_after:
            return None
        if len(y) and not self.transfer_ei:
            return None
        shared = sources.shared_space(pool)
        if not shared.any():
            return None
        weights = similarity_weights(
            descriptors, [s.descriptors for s in sources.sources], shared, self.own_weight
        )
        if len(y) >= 2:
            mu, _ = sources.predictions(x)
            wrong = misordered_pairs(mu, y)
            weights = weights * np.exp(-self.rank_temperature * (wrong - wrong[weights > 0].min()))
        return np.asarray(weights / weights.sum())
