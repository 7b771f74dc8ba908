"""The history's portfolio: how each candidate ranks across the related tasks' measured runs.

A candidate's score is the mean, over the history tasks that measured its search space, of the
normal score (:func:`.normalise.copula_scores`) of that task's nearest measured configuration: the
rank average that the recommender bench's ``portfolio`` method computes, read from the sources the
prior keeps. The opening weights the sources by descriptor similarity: on the knowledge bases
measured that orders the configurations as equal weights do (where every dataset measured the same
design, the average over every related task ranks them more reliably than the model's transfer to
one new task), and a dataset of another kind still gets its own kind's configurations. A hair of
the distance to the nearest rows is subtracted, so a measured configuration ranks above an
unmeasured neighbour that reads the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

DISTANCE_TIEBREAK = 1e-6  # per unit of encoded distance: far below any difference of normal scores


def portfolio_scores(
    candidates: Array, sources: Sequence[tuple[Array, Array]], weights: Array | None = None
) -> Array:
    """Each candidate's mean normal score over ``sources`` (each a task's encoded configuration
    columns and the normal scores of its runs), read at the task's nearest measured configuration,
    weighted by ``weights`` (default: equally; a source of weight 0 is left out); zeros when no
    source is left."""
    w = np.ones(len(sources)) if weights is None else np.asarray(weights, dtype=float)
    kept = [(source, weight) for source, weight in zip(sources, w, strict=True) if weight > 0]
    score = np.zeros(len(candidates))
    if not kept:
        return score
    distance = np.zeros(len(candidates))
    rows = np.arange(len(candidates))
    for (x, z), weight in kept:
        squared = ((candidates[:, None, :] - x[None, :, :]) ** 2).sum(-1)
        nearest = squared.argmin(1)
        score += weight * z[nearest]
        distance += np.sqrt(squared[rows, nearest])
    total = sum(weight for _, weight in kept)
    return np.asarray((score - DISTANCE_TIEBREAK * distance) / total, dtype=float)


def distinct_picks(
    order: Sequence[int], columns: Array, n: int, spread: float
) -> tuple[list[int], float]:
    """The first ``n`` of ``order`` (candidate indices, best first) none of which lies nearer to
    a pick before it than the ``spread`` quantile of the pool's pairwise distances (``columns``:
    the candidates' encoded configurations): three different bets, each the best not within
    reach of the others. Returns the picks and that minimum distance."""
    if spread <= 0 or len(columns) < 2:
        return list(order[:n]), 0.0
    squared = (columns**2).sum(1)
    pairwise = np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2 * columns @ columns.T, 0))
    minimum = float(np.quantile(pairwise[np.triu_indices(len(columns), 1)], spread))
    picks: list[int] = []
    for index in order:
        if all(pairwise[index, other] >= minimum for other in picks):
            picks.append(int(index))
            if len(picks) == n:
                break
    return picks, minimum
