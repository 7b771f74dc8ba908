"""Expected Improvement and a diverse batch of it (Kriging believer), and the opening batch.

A batch of k from one posterior: pick the best by EI (by the mean when nothing is observed yet),
pretend its outcome is the predicted mean, condition on that fantasy and pick again. A near-copy
of a chosen configuration has almost no variance left and no mean above the fantasised incumbent,
so its EI collapses: the batch spreads by value and uncertainty, not by an arbitrary distance.

The opening batch (no result yet) is three bets, not one made three times: the history
portfolio's best configurations, each at least a set distance from the others
(:func:`.portfolio.distinct_picks`), and where the pool holds fewer such bets, Expected
Improvement over the fantasised picks. Each pick says why it is there (:attr:`Pick.reason`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from scipy.special import ndtr, ndtri

from .portfolio import distinct_picks
from .prior_settings import PriorSettings

_SQRT_2PI = math.sqrt(2 * math.pi)  # scipy.stats.norm's pdf constant: the same values as norm.pdf


class ScoringPrior(Protocol):
    """What the batch selection reads of a prior (``LearnedPrior``, or its NumPy ``PriorScorer``)."""

    @property
    def settings(self) -> PriorSettings: ...

    def source_predictions(self, xc: Any) -> tuple[np.ndarray, np.ndarray]: ...

    def portfolio_scores(self, xc: Any, weights: np.ndarray) -> np.ndarray: ...

    def config_columns(self, xc: Any) -> np.ndarray: ...

    def noise_level(self) -> float: ...


class Posterior(Protocol):
    """What the batch selection reads of a task's posterior (``TaskPosterior``, or the pre-result
    ``ScorerPosterior``); candidates are its inputs (a torch tensor or a NumPy array)."""

    @property
    def prior(self) -> ScoringPrior: ...

    @property
    def weights(self) -> np.ndarray | None: ...

    @property
    def observed(self) -> int: ...

    @property
    def best_z(self) -> float: ...

    def predict_inputs(self, xc: Any) -> tuple[np.ndarray, np.ndarray]: ...

    def with_observation(self, x_row: Any, z: float) -> Posterior: ...


def expected_improvement(
    mu: np.ndarray, sd: np.ndarray, best: float, xi: float = 0.0
) -> np.ndarray:
    sd = np.maximum(sd, 1e-12)
    gap = mu - best - xi
    t = gap / sd
    return np.asarray(gap * ndtr(t) + sd * (np.exp(-(t**2) / 2.0) / _SQRT_2PI))


COVER_FLOOR = 0.01  # a pick adding less chance of covering the related tasks than this: by EI


@dataclass(frozen=True)
class Pick:
    index: int  # into the candidate inputs
    mean: float  # normalised scale, before any fantasy of this batch
    std: float
    ei: float
    reason: str = ""  # why it is in the batch, in words a user reads

    @classmethod
    def of(cls, index: int, mu: np.ndarray, sd: np.ndarray, ei: float, reason: str) -> Pick:
        """Candidate ``index`` with its prior mean and std from ``mu`` / ``sd`` (before fantasies)."""
        return cls(index, float(mu[index]), float(sd[index]), float(ei), reason)


def select_batch(
    posterior: Posterior,
    candidates: Any,
    k: int,
    exclude: set[int] | frozenset[int] = frozenset(),
) -> list[Pick]:
    """Up to ``k`` candidate indices by sequential EI with Kriging-believer fantasies; before the
    task's first result, with history sources, the opening of ``settings.opening``:
    :func:`select_opening` or :func:`select_cover`."""
    if posterior.observed == 0 and posterior.weights is not None:
        if posterior.prior.settings.opening == "cover":
            return select_cover(posterior, candidates, k, exclude)
        return select_opening(posterior, candidates, k, exclude)
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
        reason = (
            "the highest predicted mean"
            if current.observed == 0
            else f"the highest expected improvement ({ei[index]:.3f} normal-score units)"
            + (" after the picks before it" if chosen else "")
        )
        chosen.append(Pick.of(index, mu0, sd0, ei[index], reason))
        taken.add(index)
        current = current.with_observation(candidates[index], float(mu[index]))
    return chosen


def select_opening(
    posterior: Posterior,
    candidates: Any,
    k: int,
    exclude: set[int] | frozenset[int] = frozenset(),
) -> list[Pick]:
    """The history portfolio's first ``k + opening_spare`` candidates
    (:func:`.portfolio.portfolio_scores` over the sources that measured this search space, each
    weighted by its similarity), none within ``opening_spread`` of another
    (:func:`.portfolio.distinct_picks`), the ``k`` of them this task's prior mean ranks highest,
    in that order.

    The portfolio is what the related tasks agree on, robust where the prior's transfer to one
    new task is not; the spread makes its picks three bets instead of one made three times; the
    prior decides which of the leading entries this task does without (its descriptors: a
    dataset unlike the rest swaps one entry for the next)."""
    prior = posterior.prior
    settings = prior.settings
    # each source that measured this search space by its similarity (the last: the learned mean)
    score = prior.portfolio_scores(candidates, np.asarray(posterior.weights)[:-1])
    if exclude:
        score[list(exclude)] = -np.inf
    open_slots = int(np.isfinite(score).sum())
    order = np.argsort(-score, kind="stable")[:open_slots]
    head, apart = distinct_picks(
        order.tolist(),
        np.asarray(prior.config_columns(candidates), dtype=float),
        k + settings.opening_spare,
        settings.opening_spread,
    )
    mu0, sd0 = posterior.predict_inputs(candidates)
    ranked = {index: place for place, index in enumerate(order.tolist())}

    def reason(i: int) -> str:
        place = f"#{ranked[i] + 1} of the related datasets' configurations on average"
        return place + ("" if ranked[i] == 0 else f", the best {apart:.2f} or more from the rest")

    chosen = [Pick.of(i, mu0, sd0, 0.0, reason(i)) for i in sorted(head, key=lambda i: -mu0[i])[:k]]
    return chosen + _fill_by_ei(posterior, candidates, k, exclude, chosen)


def _fill_by_ei(
    posterior: Posterior,
    candidates: Any,
    k: int,
    exclude: set[int] | frozenset[int],
    chosen: list[Pick],
) -> list[Pick]:
    """The batch's remaining picks by Expected Improvement once ``chosen`` are fantasised at
    their predicted means: a near-copy of a pick has nothing left to improve."""
    current = posterior
    mu0, sd0 = posterior.predict_inputs(candidates)
    for pick in chosen:
        current = current.with_observation(candidates[pick.index], pick.mean)
    taken = set(exclude) | {pick.index for pick in chosen}
    filled: list[Pick] = []
    while len(chosen) + len(filled) < k and len(taken) < len(candidates):
        mu, sd = current.predict_inputs(candidates)
        ei = expected_improvement(mu, sd, current.best_z)
        ei[list(taken)] = -np.inf
        index = int(np.argmax(ei))
        reason = "the pool holds no further distinct bet: the most expected improvement once the "
        filled.append(Pick.of(index, mu0, sd0, ei[index], reason + "picks before it are counted"))
        taken.add(index)
        current = current.with_observation(candidates[index], float(mu[index]))
    return filled


def select_cover(
    posterior: Posterior,
    candidates: Any,
    k: int,
    exclude: set[int] | frozenset[int] = frozenset(),
) -> list[Pick]:
    """A top-k that covers the related tasks rather than k individually best points.

    Each source (a history task's posterior, or the learned mean) gives every candidate a chance
    ``p_s`` of landing in that task's top ``top_quantile``; greedily pick the candidate adding the
    most to the similarity-weighted chance that *some* pick lands there, ``sum_s w_s (1 - prod(1 - p_s))``.
    Once a pick covers the closest task, the next one goes where the other tasks disagree: the
    batch spreads over what the history does not settle. When the sources agree so well that a
    further pick adds less than :data:`COVER_FLOOR` to that chance (every source already covered),
    the rest of the batch is chosen by Kriging-believer EI, so it never degrades into near-copies."""
    prior = posterior.prior
    mu0, sd0 = posterior.predict_inputs(candidates)
    means, sds = prior.source_predictions(candidates)
    noise = prior.noise_level()
    threshold = float(ndtri(1 - prior.settings.top_quantile))
    hit = ndtr((means - threshold) / np.sqrt(sds**2 + noise))
    weights = np.asarray(posterior.weights)
    miss = np.ones(len(weights))
    taken = set(exclude)
    chosen: list[Pick] = []
    current = posterior
    for _ in range(min(k, len(candidates) - len(taken))):
        gain = weights @ (miss[:, None] * hit) + 1e-9 * (mu0 - mu0.min())  # ties: by the mean
        ei = np.zeros_like(mu0)
        if taken:
            gain[list(taken)] = -np.inf
        if chosen and np.max(gain) < COVER_FLOOR:
            mu, sd = current.predict_inputs(candidates)
            ei = expected_improvement(mu, sd, current.best_z)
            gain = ei.copy()
            gain[list(taken)] = -np.inf
        index = int(np.argmax(gain))
        chosen.append(Pick.of(index, mu0, sd0, ei[index], "covers the related tasks' best"))
        taken.add(index)
        miss = miss * (1 - hit[:, index])
        fantasy, _ = current.predict_inputs(candidates[index : index + 1])
        current = current.with_observation(candidates[index], float(fantasy[0]))
    return chosen
