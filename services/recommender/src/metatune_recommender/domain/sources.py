"""Transfer sources: the history tasks of a new task's search space, each as its GP posterior.

A history task that measured the new task's configurations (its candidate pool is mostly that
task's rows: the same search space) knows exactly what the smooth learned mean only approximates,
e.g. a narrow top one architecture wide. A task of another search space is no source: its
posterior away from its own rows is the learned mean again, only flatter, and with a few results
it can win the weight by ordering them by chance. :class:`TransferSources` holds every history
task's posterior under the shared hyperparameters, decides which of them measured a pool's
search space, and gives a task's mean as their weighted posteriors (:mod:`.task_weighting` says
how much each speaks for the task).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .errors import SurrogateFailure
from .history import Task
from .portfolio import portfolio_scores
from .scoring import ScorerSource, array_config_keys, overlap_shares
from .shared_gp import DTYPE, SharedGp


@dataclass(frozen=True)
class HistorySource:
    """One history task's GP posterior under the learned hyperparameters (on its normal scores)."""

    name: str
    descriptors: Mapping[str, Any]
    x: torch.Tensor
    chol: torch.Tensor
    alpha: torch.Tensor
    configs: frozenset[bytes]  # its measured configurations (config_keys), for the same-space gate
    z: torch.Tensor  # the normal scores of its runs, at ``x`` (the history's portfolio reads them)

    @classmethod
    def fit(
        cls, gp: SharedGp, task: Task, x: torch.Tensor, z: torch.Tensor, space: Sequence[int]
    ) -> HistorySource:
        """``task``'s posterior on ``gp`` given its normal scores ``z`` at inputs ``x``; ``space``:
        the configuration columns that place a run in the search space (the same-space gate)."""
        with torch.no_grad():
            cov = gp.covariance(x) + 1e-8 * torch.eye(len(x), dtype=DTYPE)
            try:
                chol = torch.linalg.cholesky(cov)
            except RuntimeError as exc:
                raise SurrogateFailure("history posterior", str(exc)) from exc
            alpha = torch.cholesky_solve((z - gp.mean(x)).unsqueeze(-1), chol).squeeze(-1)
        return cls(task.name, dict(task.descriptors), x, chol, alpha, config_keys(x, space), z)

    def numbers(self) -> ScorerSource:
        """The same posterior as arrays (:class:`~.scoring.PriorScorer`'s), its Cholesky factor
        inverted once."""
        eye = torch.eye(len(self.chol), dtype=DTYPE)
        return ScorerSource(
            self.name,
            dict(self.descriptors),
            self.x.numpy().copy(),
            torch.linalg.solve_triangular(self.chol, eye, upper=False).numpy(),
            self.alpha.numpy().copy(),
            self.configs,
            self.z.numpy().copy(),
        )


class TransferSources:
    """The history tasks' posteriors on ``gp`` (none when transfer is off), the configuration
    columns ``space`` that place a run in the search space, and ``source_overlap``, the share of
    configurations a source must share with a pool."""

    def __init__(
        self,
        gp: SharedGp,
        sources: Sequence[HistorySource],
        space: Sequence[int],
        source_overlap: float,
    ) -> None:
        self.gp = gp
        self.sources = list(sources)
        self.space = list(space)
        self.source_overlap = source_overlap
        # memoised predictions: a study scores its candidates many times
        self._predictions: dict[Any, tuple[np.ndarray, np.ndarray]] = {}

    def predictions(self, xc: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Each history task's posterior (mean, sd), shape (tasks, n), at ``xc``'s configurations
        as if they were run on that task; the last row is the learned mean at ``xc`` itself (sd: the
        kernel's). Memoised: the candidates are scored many times in a study."""
        key = (tuple(xc.shape), hash(xc.numpy().tobytes()))
        if key in self._predictions:
            return self._predictions[key]
        d, kernel, mean = self.gp.config_dim, self.gp.kernel, self.gp.mean
        means, sds = [], []
        with torch.no_grad():
            for source in self.sources:
                xs = xc.clone()
                xs[:, d:] = source.x[0, d:]
                k = kernel(xs, source.x).to_dense()
                means.append(mean(xs) + k @ source.alpha)
                v = torch.linalg.solve_triangular(source.chol, k.T, upper=False)
                var = kernel(xs, diag=True) - (v**2).sum(0)
                sds.append(torch.sqrt(var.clamp_min(1e-12)))
            means.append(mean(xc))
            sds.append(torch.sqrt(kernel(xc, diag=True)))
        out = (torch.stack(means).numpy(), torch.stack(sds).numpy())
        if len(self._predictions) > 64:
            self._predictions.clear()
        self._predictions[key] = out
        return out

    def task_mean(self, x: torch.Tensor, weights: np.ndarray | None) -> torch.Tensor:
        """The prior mean of a task at ``x``: the sources' posteriors and the learned mean weighted
        by ``weights``, or the learned mean alone (None)."""
        if weights is None:
            return self.gp.mean(x)
        mu, _ = self.predictions(x)
        return torch.as_tensor(weights @ mu, dtype=DTYPE)

    def portfolio_scores(self, xc: torch.Tensor, weights: np.ndarray) -> np.ndarray:
        """The history's portfolio score of ``xc``'s configurations over the sources of nonzero
        ``weights`` (:func:`.portfolio.portfolio_scores`)."""
        d = self.gp.config_dim
        sources = [(s.x[:, :d].numpy(), s.z.numpy()) for s in self.sources]
        return portfolio_scores(xc[:, :d].numpy(), sources, weights)

    def shared_space(self, pool: torch.Tensor | None) -> np.ndarray:
        """Which sources measured the candidate ``pool``'s search space: at least
        ``source_overlap`` of the pool's configurations are rows of that history task (a table of
        the same grid), or of that task's rows are in the pool (the service's pool: a Sobol design
        plus every configuration the knowledge base measured at the reference budget), compared
        exactly on the encoded configuration columns (``source_overlap`` 0: every source; no
        pool: none)."""
        if self.source_overlap <= 0:
            return np.ones(len(self.sources), dtype=bool)
        if pool is None:
            return np.zeros(len(self.sources), dtype=bool)
        wanted = config_keys(pool, self.space)
        return overlap_shares(wanted, [s.configs for s in self.sources], self.source_overlap)


def config_keys(x: torch.Tensor, columns: Sequence[int]) -> frozenset[bytes]:
    """:func:`.scoring.array_config_keys` of a tensor."""
    return array_config_keys(x.numpy(), columns)
