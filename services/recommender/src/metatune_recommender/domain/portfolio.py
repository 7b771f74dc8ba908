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
    table, kept = portfolio_table(candidates, sources, weights)
    if not len(kept):
        return np.zeros(len(candidates))
    return np.asarray(kept @ table / kept.sum(), dtype=float)


def portfolio_table(
    candidates: Array, sources: Sequence[tuple[Array, Array]], weights: Array | None = None
) -> tuple[Array, Array]:
    """Per kept source (weight above 0), each candidate's normal score on it (at the source's
    nearest measured configuration, less a hair of the distance to it), and the kept weights."""
    w = np.ones(len(sources)) if weights is None else np.asarray(weights, dtype=float)
    rows = np.arange(len(candidates))
    table, kept = [], []
    for (x, z), weight in zip(sources, w, strict=True):
        if weight <= 0:
            continue
        squared = ((candidates[:, None, :] - x[None, :, :]) ** 2).sum(-1)
        nearest = squared.argmin(1)
        table.append(z[nearest] - DISTANCE_TIEBREAK * np.sqrt(squared[rows, nearest]))
        kept.append(weight)
    if not table:
        return np.zeros((0, len(candidates))), np.zeros(0)
    return np.asarray(table, dtype=float), np.asarray(kept, dtype=float)


BET_FLOOR = 0.05  # normal-score units: a pick raising the portfolio's best-of less is no new bet


def complementary_portfolio(
    table: Array, weights: Array, k: int, exclude: set[int] | frozenset[int] = frozenset()
) -> list[tuple[int, float]]:
    """Up to ``k`` candidates chosen together, each with what it adds: the first is the best on
    average over the sources (``table``: sources x candidates of normal scores), each next one the
    candidate that most raises the weighted mean of every source's best score among the picks
    (greedy; as the cold-start portfolio was built), so a pick wins where the others lose. Stops
    early when no candidate adds :data:`BET_FLOOR` (the sources agree: the rest is another rule's)."""
    if not len(weights):
        return []
    share = weights / weights.sum()
    mean = share @ table
    best = np.full(len(weights), -np.inf)
    picks: list[tuple[int, float]] = []
    open_ = np.ones(table.shape[1], dtype=bool)
    open_[list(exclude)] = False
    for _ in range(min(k, int(open_.sum()))):
        # what each candidate adds to the mean of every source's best among the picks
        gain = share @ np.maximum(best[:, None], table) - share @ best if picks else mean.copy()
        score = np.where(open_, gain + 1e-6 * mean, -np.inf)  # ties: the better all-rounder
        index = int(np.argmax(score))
        if picks and gain[index] < BET_FLOOR:
            break
        picks.append((index, float(gain[index])))
        best = np.maximum(best, table[:, index])
        open_[index] = False
    return picks
