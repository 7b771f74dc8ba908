"""Per-task normalisation of objectives, so tasks of different scales share one prior.

History tasks: normal scores of ranks (a Gaussian copula), ``z = Phi^-1((rank - 1/2) / n)``, ties
averaged. Ranks make BLEU, accuracy and minus-perplexity comparable and keep a few diverged runs
(DeBERTa's 0.32 accuracy draws) from flattening everything else, which a z-score would not.

The task being tuned has only a few observations, too few for ranks to mean much. Its raw values
are mapped to the prior's scale by the affine map ``z = (y - a) / b`` (b > 0) under which they are
most likely under the learned prior (maximum marginal likelihood of ``y = a + b f``); with one
observation there is no scale to learn and its score is the prior's mean there. From
:data:`~.adapt.ADAPT_AFTER` results on, :mod:`.adapt` refits the map jointly with the task's kernel.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.stats import norm, rankdata


def copula_scores(values: np.ndarray) -> np.ndarray:
    """Normal scores of the ranks of ``values`` (higher value, higher score)."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return values
    if n == 1:
        return np.zeros(1)
    ranks = rankdata(values, method="average")
    return np.asarray(norm.ppf((ranks - 0.5) / n))


def affine_to_prior(
    y: np.ndarray, prior_mean: np.ndarray, prior_cov: np.ndarray
) -> tuple[float, float]:
    """(a, b) maximising the likelihood of raw ``y`` as ``a + b (m + f)``, ``f ~ GP(0, K)``.

    How much of the learned mean ``m`` a task keeps is decided later, with the task's own kernel
    (:mod:`.adapt`), once it has enough results to say."""
    y = np.asarray(y, dtype=float)
    u = np.asarray(prior_mean, dtype=float)
    n = len(y)
    spread = float(np.std(y))
    if n < 2 or spread == 0:
        b = spread if spread > 0 else 1.0
        return float(np.mean(y) - b * np.mean(u)), b
    chol = np.linalg.cholesky(prior_cov + 1e-9 * np.eye(n))

    def nll(params: np.ndarray) -> float:
        a, log_b = params
        w = np.linalg.solve(chol, (y - a) / np.exp(log_b) - u)
        # weak log-normal prior on b around the observed spread keeps n=2 well posed
        return float(n * log_b + 0.5 * (w @ w) + 0.5 * ((log_b - np.log(spread)) / 3.0) ** 2)

    b0 = spread / max(float(np.std(u)), 0.5)
    start = np.array([float(np.mean(y) - b0 * np.mean(u)), np.log(b0)])
    result = minimize(
        nll, start, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 600}
    )
    x = result.x if np.all(np.isfinite(result.x)) else start
    return float(x[0]), float(np.exp(x[1]))
