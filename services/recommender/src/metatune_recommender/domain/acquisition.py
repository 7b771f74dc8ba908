"""Expected Improvement and a diverse batch of it (Kriging believer).

A batch of k from one posterior: pick the best by EI (by the mean when nothing is observed yet),
pretend its outcome is the predicted mean, condition on that fantasy and pick again. A near-copy
of a chosen configuration has almost no variance left and no mean above the fantasised incumbent,
so its EI collapses: the batch spreads by value and uncertainty, not by an arbitrary distance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import norm

from .prior import TaskPosterior


def expected_improvement(
    mu: np.ndarray, sd: np.ndarray, best: float, xi: float = 0.0
) -> np.ndarray:
    sd = np.maximum(sd, 1e-12)
    gap = mu - best - xi
    t = gap / sd
    return gap * norm.cdf(t) + sd * norm.pdf(t)


@dataclass(frozen=True)
class Pick:
    index: int  # into the candidate inputs
    mean: float  # normalised scale, before any fantasy of this batch
    std: float
    ei: float


def select_batch(
    posterior: TaskPosterior,
    candidates: torch.Tensor,
    k: int,
    exclude: set[int] | frozenset[int] = frozenset(),
) -> list[Pick]:
    """Up to ``k`` candidate indices by sequential EI with Kriging-believer fantasies."""
    mu0, sd0 = posterior.predict_inputs(candidates)
    chosen: list[Pick] = []
    taken = set(exclude)
    current = posterior
    for _ in range(min(k, len(candidates) - len(taken))):
        mu, sd = (mu0, sd0) if current is posterior else current.predict_inputs(candidates)
        if current.observed == 0:
            score = mu.copy()
            ei = np.zeros_like(mu)
        else:
            ei = expected_improvement(mu, sd, current.best_z)
            score = ei.copy()
        if taken:
            score[list(taken)] = -np.inf
        index = int(np.argmax(score))
        chosen.append(
            Pick(index=index, mean=float(mu0[index]), std=float(sd0[index]), ei=float(ei[index]))
        )
        taken.add(index)
        current = current.with_observation(candidates[index], float(mu[index]))
    return chosen
