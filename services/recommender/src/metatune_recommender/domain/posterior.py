"""A task's posterior under the learned prior: what acquisition reads (:mod:`.acquisition`).

The task's results on the prior's normalised scale (``a + b z`` is the raw metric), its mean the
prior's for the task (the weighted transfer sources, or the learned mean) times the weight task
adaptation left it, its kernel and noise the task's own once adapted (:mod:`.adapt`), else the
pre-trained ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import gpytorch
import numpy as np
import torch

from .acquisition import ScoringPrior
from .errors import SurrogateFailure
from .scoring import Incumbent
from .shared_gp import DTYPE, SharedGp


class ConditionedPrior(ScoringPrior, Protocol):
    """What a task's posterior reads of its prior (:class:`~.prior.LearnedPrior`): what acquisition
    reads, the shared kernel and noise, the task's prior mean and the inputs of configurations."""

    @property
    def gp(self) -> SharedGp: ...

    def task_mean(self, x: torch.Tensor, weights: np.ndarray | None) -> torch.Tensor: ...

    def inputs(
        self, configs: Sequence[Mapping[str, Any]], descriptors: Mapping[str, Any]
    ) -> torch.Tensor: ...


@dataclass(frozen=True)
class TaskPosterior(Incumbent):
    """A task's GP posterior on the prior's normalised scale; ``a + b z`` is the raw metric.

    ``kernel`` / ``noise``: the task's own (adapted) hyperparameters, else the pre-trained ones."""

    prior: ConditionedPrior
    descriptors: Mapping[str, Any]
    x: torch.Tensor
    z: torch.Tensor
    a: float
    b: float
    mean_weight: float = 1.0  # how much of the learned mean this task keeps
    kernel: gpytorch.kernels.Kernel | None = None
    noise: torch.Tensor | None = None
    weights: np.ndarray | None = None  # over the prior's sources (None: its learned mean alone)

    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        return self.mean_weight * self.prior.task_mean(x, self.weights)

    def _k(
        self, x1: torch.Tensor, x2: torch.Tensor | None = None, diag: bool = False
    ) -> torch.Tensor:
        kernel = self.kernel if self.kernel is not None else self.prior.gp.kernel
        if diag:
            return kernel(x1, diag=True)
        if x2 is not None:
            return kernel(x1, x2).to_dense()
        noise = self.noise if self.noise is not None else self.prior.gp.likelihood.noise
        return kernel(x1).to_dense() + noise * torch.eye(len(x1), dtype=DTYPE)

    def predict_inputs(self, xc: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            mean_c = self._mean(xc)
            var_c = self._k(xc, diag=True)
            if len(self.z) == 0:
                mu, var = mean_c, var_c
            else:
                chol = conditioning_cholesky(self._k(self.x))
                k_co = self._k(xc, self.x)
                residual = (self.z - self._mean(self.x)).unsqueeze(-1)
                alpha = torch.cholesky_solve(residual, chol).squeeze(-1)
                mu = mean_c + k_co @ alpha
                v = torch.linalg.solve_triangular(chol, k_co.T, upper=False)
                var = var_c - (v**2).sum(0)
        mu_np, sd_np = mu.numpy(), torch.sqrt(var.clamp_min(1e-12)).numpy()
        if not (np.all(np.isfinite(mu_np)) and np.all(np.isfinite(sd_np))):
            raise SurrogateFailure("prediction", "non-finite posterior")
        return mu_np, sd_np

    def predict(self, configs: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (normalised scale) at ``configs``."""
        return self.predict_inputs(self.prior.inputs(configs, self.descriptors))

    def with_observation(self, x_row: torch.Tensor, z: float) -> TaskPosterior:
        """The same posterior with one more (possibly fantasised) observation on the normalised scale."""
        return TaskPosterior(
            self.prior,
            self.descriptors,
            torch.cat([self.x, x_row.reshape(1, -1)]),
            torch.cat([self.z, torch.tensor([z], dtype=DTYPE)]),
            self.a,
            self.b,
            self.mean_weight,
            self.kernel,
            self.noise,
            self.weights,
        )


def conditioning_cholesky(cov: torch.Tensor) -> torch.Tensor:
    """Cholesky factor with escalating jitter: an adapted kernel with little noise over near-equal
    configurations is singular to rounding only, which a jitter far below the noise floor cures."""
    eye = torch.eye(len(cov), dtype=DTYPE)
    scale = float(torch.diagonal(cov).abs().mean()) if len(cov) else 1.0
    error = "non-finite covariance"
    if not bool(torch.isfinite(cov).all()):
        raise SurrogateFailure("conditioning", error)
    for jitter in (1e-8, 1e-6, 1e-4, 1e-2):
        chol, info = torch.linalg.cholesky_ex(cov + jitter * scale * eye)
        if int(info) == 0:
            return chol
        error = (
            f"not positive-definite (leading minor {int(info)}) with jitter {jitter:g} x {scale:g}"
        )
    raise SurrogateFailure("conditioning", error)
