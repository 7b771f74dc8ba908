"""Discrete power-law fit by maximum likelihood (Clauset, Shalizi & Newman 2009, SIAM Review 51:661).

The data are the frequencies of word types: P(f) = f**-alpha / zeta(alpha, x_min) for f >= x_min,
where zeta is the Hurwitz zeta function. For each candidate x_min, alpha maximises the exact
discrete likelihood; x_min is the candidate whose fitted tail is closest to the data in
Kolmogorov-Smirnov distance (the paper's method). The standard error is the inverse square
root of the observed Fisher information, n * d^2/d alpha^2 ln zeta(alpha, x_min) (their eq. 3.6).

Zipf's rank-frequency law f(r) ~ r**-s corresponds to alpha = 1 + 1/s: English text has
alpha near 2 (s near 1). This alpha is *not* the slope of a log-log least-squares line,
which is biased and has no valid error bar.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import zeta

ALPHA_BOUNDS = (1.0 + 1e-6, 8.0)
MIN_TAIL = 50  # observations at or above x_min needed to fit at all
MAX_CANDIDATES = 200  # smallest distinct values tried as x_min


@dataclass(frozen=True)
class PowerLawFit:
    alpha: float
    alpha_se: float
    x_min: int
    n_tail: int  # observations >= x_min
    ks: float  # KS distance of the fitted tail

    @property
    def rank_exponent(self) -> float:
        """Zipf's s in f(r) ~ r**-s."""
        return 1.0 / (self.alpha - 1.0)


def _mle(values: np.ndarray, weights: np.ndarray, x_min: int) -> float:
    n, sum_log = weights.sum(), float(weights @ np.log(values))

    def neg_log_likelihood(alpha: float) -> float:
        return float(n * np.log(zeta(alpha, x_min)) + alpha * sum_log)

    return float(
        minimize_scalar(
            neg_log_likelihood, bounds=ALPHA_BOUNDS, method="bounded", options={"xatol": 1e-7}
        ).x
    )


def _ks(values: np.ndarray, weights: np.ndarray, alpha: float, x_min: int) -> float:
    """Largest gap between empirical and fitted P(X >= x) over the observed x >= x_min."""
    n = weights.sum()
    empirical = np.cumsum(weights[::-1])[::-1] / n
    fitted = zeta(alpha, values) / zeta(alpha, x_min)
    return float(np.max(np.abs(empirical - fitted)))


def _standard_error(alpha: float, x_min: int, n: int) -> float:
    h = 1e-4 * alpha

    def log_z(a: float) -> float:
        return float(np.log(zeta(a, x_min)))

    information = (log_z(alpha + h) - 2 * log_z(alpha) + log_z(alpha - h)) / h**2
    return float(1.0 / np.sqrt(n * information)) if information > 0 else float("inf")


def fit_discrete_power_law(frequencies: Mapping[int, int] | np.ndarray) -> PowerLawFit | None:
    """Fit ``frequencies`` (raw positive integers, or a mapping value -> how many times it occurs).

    Returns None when fewer than ``MIN_TAIL`` observations are available.
    """
    if isinstance(frequencies, Mapping):
        items = sorted((int(v), int(c)) for v, c in frequencies.items() if v >= 1 and c > 0)
        values = np.array([v for v, _ in items], dtype=np.float64)
        weights = np.array([c for _, c in items], dtype=np.float64)
    else:
        raw = np.asarray(frequencies)
        values_int, counts = np.unique(raw[raw >= 1], return_counts=True)
        values, weights = values_int.astype(np.float64), counts.astype(np.float64)
    if weights.sum() < MIN_TAIL:
        return None

    tail_sizes = np.cumsum(weights[::-1])[::-1]
    best: PowerLawFit | None = None
    for index in range(min(values.size, MAX_CANDIDATES)):
        if tail_sizes[index] < MIN_TAIL:
            break
        x_min = int(values[index])
        tail_values, tail_weights = values[index:], weights[index:]
        alpha = _mle(tail_values, tail_weights, x_min)
        ks = _ks(tail_values, tail_weights, alpha, x_min)
        if best is None or ks < best.ks:
            n = int(tail_sizes[index])
            best = PowerLawFit(alpha, _standard_error(alpha, x_min, n), x_min, n, ks)
    return best
