"""A fitted prior's pre-result path in NumPy: a study's first batch without torch or gpytorch.

Before a task has results, its posterior is the prior itself: the mean is the weighted history
sources' posteriors (or the learned mean), the covariance the pre-trained kernel plus noise, and
the top-k's fantasised picks condition on it with those hyperparameters. None of that trains or
adapts anything, so it needs the prior's numbers, not its modules. :class:`PriorScorer` holds them
as arrays (the MLP means' weights, the Matérn-5/2 lengthscales and scale, the noise, each history
source's inputs, inverse Cholesky factor and weights) with the candidates it scores and their encoded
configuration columns, and evaluates the same formulas as :class:`~.prior.LearnedPrior` and
:class:`~.posterior.TaskPosterior` (the kernel as gpytorch computes it: inputs centred on the first
argument's mean, distances clamped at 1e-15, 1e-30 squared on the diagonal), so the top-k and its
predictions are the torch path's to rounding (the tests compare them). Pickled, it loads in
milliseconds where the prior needs torch and gpytorch imported (seconds): what lets
``metatune recommend`` answer from a cached fit without importing either.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .encoding import Encoder
from .errors import SurrogateFailure
from .portfolio import portfolio_scores
from .prior_settings import PriorSettings
from .similarity import descriptor_similarity

Array = NDArray[np.float64]


# what a run's budget adds to its configuration's columns (canonical names, :mod:`.encoding`):
# two runs of one configuration at two budgets measured the same point of the search space
BUDGET_FIELDS = frozenset(
    {"epochs", "max_steps", "max_seq_length", "max_train_rows", "train_rows", "device"}
)


def space_columns(encoder: Encoder) -> list[int]:
    """The configuration columns that place a run in the search space (its budget's left out)."""
    return encoder.columns_without(BUDGET_FIELDS) or [0]


def array_config_keys(x: Array, columns: Sequence[int]) -> frozenset[bytes]:
    """The distinct configurations among ``x``'s rows (the encoded ``columns``, rounded so that
    one configuration encoded twice compares equal), as hashable keys."""
    return frozenset(r.tobytes() for r in np.round(x[:, list(columns)], 9))


def overlap_shares(
    wanted: frozenset[bytes], sources: Sequence[frozenset[bytes]], threshold: float
) -> NDArray[np.bool_]:
    """Which sources share the search space of ``wanted``: at least ``threshold`` of the smaller
    of the two sets of configurations is in both."""
    share = [len(wanted & s) / max(1, min(len(wanted), len(s))) for s in sources]
    return np.array(share) >= threshold


def similarity_weights(
    descriptors: Mapping[str, Any],
    sources: Sequence[Mapping[str, Any]],
    shared: NDArray[np.bool_],
    own_weight: float,
) -> Array:
    """The sources' weights by descriptor similarity (0 where not ``shared``), then the learned
    mean's ``own_weight``: unnormalised."""
    similar = np.zeros(len(sources))
    similar[shared] = descriptor_similarity(
        descriptors, [d for d, ok in zip(sources, shared, strict=True) if ok]
    )
    return np.append((1 - own_weight) * similar, own_weight)


class Incumbent:
    """What a posterior with observations ``z`` reports about them (its subclasses set ``z``)."""

    z: Any

    @property
    def observed(self) -> int:
        return len(self.z)

    @property
    def best_z(self) -> float:
        return float(self.z.max()) if len(self.z) else -math.inf


@dataclass(frozen=True)
class Layer:
    """One linear layer, ``x @ weight.T + bias`` (torch.nn.Linear's layout)."""

    weight: Array
    bias: Array


@dataclass(frozen=True)
class ScorerSource:
    """A history task's GP posterior under the learned hyperparameters (see :class:`~.sources.HistorySource`)."""

    name: str
    descriptors: Mapping[str, Any]
    x: Array
    chol_inverse: Array  # the inverse of its covariance's Cholesky factor (lower triangular)
    alpha: Array
    configs: frozenset[bytes]
    z: Array  # the normal scores of its runs, at ``x``


@dataclass
class PriorScorer:
    """A fitted prior's numbers and its candidates, for the pre-result recommendation."""

    config_encoder: Encoder
    descriptor_encoder: Encoder
    settings: PriorSettings
    members: list[list[Layer]]  # the MLP means (tanh between layers); empty: ``constant`` mean
    constant: float
    lengthscale: Array  # (config columns,)
    outputscale: float
    noise: float
    sources: list[ScorerSource]
    scored: list[dict[str, Any]]  # the candidates, as the reference budget would train them
    scored_columns: Array  # their encoded configuration columns
    # stds an 80 % interval spans before results (:mod:`.intervals`), by whether the study has a
    # label probe (:mod:`.levels`), once measured: kept with the scorer, so a process that loads
    # it does not measure it again
    interval_factors: dict[bool, float] = field(default_factory=dict)
    _cache: dict[Any, tuple[Array, Array]] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    def with_scored(self, scored: Sequence[Mapping[str, Any]]) -> PriorScorer:
        """This scorer with other candidates (the same configurations at another budget): their
        columns encoded here, in NumPy."""
        if scored is self.scored:
            return self
        columns = self.config_encoder.transform(scored)
        return dataclasses.replace(
            self,
            scored=[dict(config) for config in scored],
            scored_columns=columns if columns.shape[1] else np.zeros((len(scored), 1)),
            _cache={},
        )

    # ------------------------------------------------------------------ the prior's parts
    @property
    def config_dim(self) -> int:
        return max(1, self.config_encoder.dim)

    def noise_level(self) -> float:
        return self.noise

    def inputs(self, configs: Sequence[Mapping[str, Any]], descriptors: Mapping[str, Any]) -> Array:
        """As :meth:`.prior.LearnedPrior.inputs`: configuration columns, then the descriptors'."""
        if configs is self.scored:
            cfg = self.scored_columns
        else:
            cfg = self.config_encoder.transform(configs)
            if cfg.shape[1] == 0:
                cfg = np.zeros((len(configs), 1))
        desc = self.descriptor_encoder.transform([descriptors])
        return np.asarray(np.hstack([cfg, np.repeat(desc, len(configs), axis=0)]), dtype=float)

    def mean(self, x: Array) -> Array:
        """The learned mean (the members' average), or the constant one."""
        if not self.members:
            return np.full(len(x), self.constant)
        each = []
        for layers in self.members:
            h = x
            for i, layer in enumerate(layers):
                h = h @ layer.weight.T + layer.bias
                if i < len(layers) - 1:
                    h = np.tanh(h)
            each.append(h[:, 0])
        return np.asarray(np.stack(each).mean(0))

    def kernel(self, x1: Array, x2: Array | None = None) -> Array:
        """The scaled Matérn-5/2 kernel on the configuration columns; ``x2`` None: ``x1`` with
        itself (zero distance on the diagonal)."""
        d = self.config_dim
        a = x1[:, :d]
        centre = a.mean(0) if len(a) else np.zeros(d)
        a = (a - centre) / self.lengthscale
        if x2 is None:
            sq = ((a[:, None, :] - a[None, :, :]) ** 2).sum(-1)
            np.fill_diagonal(sq, 0.0)
            distance = np.sqrt(np.maximum(sq, 1e-30))
        else:  # |a|^2 + |b|^2 - 2 a.b, as torch.cdist computes distances between larger sets
            b = (x2[:, :d] - centre) / self.lengthscale
            sq = (a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2.0 * (a @ b.T)
            distance = np.maximum(np.sqrt(np.maximum(sq, 0.0)), 1e-15)
        constant = math.sqrt(5) * distance + 1 + 5.0 / 3.0 * distance**2
        return np.asarray(self.outputscale * constant * np.exp(-math.sqrt(5) * distance))

    def kernel_diag(self, x: Array) -> Array:
        return np.full(len(x), self.outputscale)

    # ------------------------------------------------------------------ transfer
    def source_predictions(self, xc: Array) -> tuple[Array, Array]:
        """As :meth:`.prior.LearnedPrior.source_predictions`: each source's posterior (mean, sd) at
        ``xc``'s configurations on that source's task, then the learned mean at ``xc``."""
        key = (xc.shape, xc.tobytes())
        if key in self._cache:
            return self._cache[key]
        d = self.config_dim
        means, sds = [], []
        if self.sources:
            # the kernel reads the configuration columns only, which a source's view of ``xc``
            # shares with ``xc``: one kernel matrix against every source's rows, and the mean
            # once over every source's view (its descriptors in place of the task's)
            k_all = self.kernel(xc, np.concatenate([s.x for s in self.sources]))
            views = np.repeat(xc[None], len(self.sources), axis=0)
            views[:, :, d:] = np.stack([s.x[0, d:] for s in self.sources])[:, None, :]
            m_all = self.mean(views.reshape(-1, xc.shape[1])).reshape(len(self.sources), len(xc))
            start = 0
            for source, m in zip(self.sources, m_all, strict=True):
                k = k_all[:, start : start + len(source.x)]
                start += len(source.x)
                means.append(m + k @ source.alpha)
                v = source.chol_inverse @ k.T
                var = self.kernel_diag(xc) - (v**2).sum(0)
                sds.append(np.sqrt(np.maximum(var, 1e-12)))
        means.append(self.mean(xc))
        sds.append(np.sqrt(self.kernel_diag(xc)))
        out = (np.stack(means), np.stack(sds))
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = out
        return out

    def portfolio_scores(self, xc: Array, weights: Array) -> Array:
        """As :meth:`.prior.LearnedPrior.portfolio_scores`."""
        d = self.config_dim
        return portfolio_scores(xc[:, :d], [(s.x[:, :d], s.z) for s in self.sources], weights)

    def config_columns(self, xc: Array) -> Array:
        """As :meth:`.prior.LearnedPrior.config_columns`."""
        return xc[:, : self.config_dim]

    def shared_space(self, pool: Array) -> NDArray[np.bool_]:
        """As :meth:`.sources.TransferSources.shared_space`."""
        if self.settings.source_overlap <= 0:
            return np.ones(len(self.sources), dtype=bool)
        wanted = array_config_keys(pool, space_columns(self.config_encoder))
        return overlap_shares(
            wanted, [s.configs for s in self.sources], self.settings.source_overlap
        )

    def source_weights(self, descriptors: Mapping[str, Any], pool: Array) -> Array | None:
        """As :meth:`.task_weighting.TaskWeighting.weights` for a task without results."""
        if not self.sources or self.settings.transfer_after > 0:
            return None
        shared = self.shared_space(pool)
        if not shared.any():
            return None
        weights = similarity_weights(
            descriptors, [s.descriptors for s in self.sources], shared, self.settings.own_weight
        )
        return np.asarray(weights / weights.sum())

    def condition(
        self,
        descriptors: Mapping[str, Any],
        configs: Sequence[Mapping[str, Any]],
        values: Sequence[float],
        pool: Array,
    ) -> ScorerPosterior:
        """The posterior of a task without results (``configs`` and ``values`` must be empty:
        results adapt the prior, which is the torch path's)."""
        if configs or len(values):
            raise ValueError("a scorer conditions a task without results only")
        x = np.zeros((0, self.config_dim + self.descriptor_encoder.dim))
        return ScorerPosterior(self, x, np.zeros(0), self.source_weights(descriptors, pool))


@dataclass(frozen=True)
class ScorerPosterior(Incumbent):
    """A task's posterior before its results, with fantasised observations (Kriging believer);
    :class:`~.posterior.TaskPosterior`'s interface as :mod:`.acquisition` uses it."""

    prior: PriorScorer
    x: Array
    z: Array
    weights: Array | None
    a: float = 0.0
    b: float = 1.0

    def _mean(self, x: Array) -> Array:
        if self.weights is None:
            return self.prior.mean(x)
        mu, _ = self.prior.source_predictions(x)
        return np.asarray(self.weights @ mu)

    def predict_inputs(self, xc: Array) -> tuple[Array, Array]:
        mean_c = self._mean(xc)
        var_c = self.prior.kernel_diag(xc)
        if len(self.z) == 0:
            mu, var = mean_c, var_c
        else:
            cov = self.prior.kernel(self.x) + self.prior.noise * np.eye(len(self.x))
            chol = _cholesky(cov)
            k_co = self.prior.kernel(xc, self.x)
            alpha = _solve_upper(chol.T, _solve_lower(chol, self.z - self._mean(self.x)))
            mu = mean_c + k_co @ alpha
            v = _solve_lower(chol, k_co.T)
            var = var_c - (v**2).sum(0)
        sd = np.sqrt(np.maximum(var, 1e-12))
        if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(sd))):
            raise SurrogateFailure("prediction", "non-finite posterior")
        return mu, sd

    def with_observation(self, x_row: Array, z: float) -> ScorerPosterior:
        return ScorerPosterior(
            self.prior,
            np.vstack([self.x, x_row.reshape(1, -1)]),
            np.append(self.z, z),
            self.weights,
            self.a,
            self.b,
        )


def _solve_lower(lower: Array, rhs: Array) -> Array:
    """``lower^-1 rhs`` by forward substitution, one row at a time over every column of ``rhs``."""
    out = np.array(rhs, dtype=float, copy=True)
    for i in range(len(lower)):
        if i:
            out[i] -= lower[i, :i] @ out[:i]
        out[i] /= lower[i, i]
    return out


def _solve_upper(upper: Array, rhs: Array) -> Array:
    """``upper^-1 rhs`` by back substitution."""
    out = np.array(rhs, dtype=float, copy=True)
    for i in range(len(upper) - 1, -1, -1):
        if i < len(upper) - 1:
            out[i] -= upper[i, i + 1 :] @ out[i + 1 :]
        out[i] /= upper[i, i]
    return out


def _cholesky(cov: Array) -> Array:
    """As :func:`.posterior.conditioning_cholesky`: the factor with escalating jitter, or SurrogateFailure."""
    if not bool(np.isfinite(cov).all()):
        raise SurrogateFailure("conditioning", "non-finite covariance")
    eye = np.eye(len(cov))
    scale = float(np.abs(np.diagonal(cov)).mean()) if len(cov) else 1.0
    error = "non-finite covariance"
    for jitter in (1e-8, 1e-6, 1e-4, 1e-2):
        try:
            return np.asarray(np.linalg.cholesky(cov + jitter * scale * eye))
        except np.linalg.LinAlgError as exc:
            error = f"not positive-definite ({exc}) with jitter {jitter:g} x {scale:g}"
    raise SurrogateFailure("conditioning", error)
