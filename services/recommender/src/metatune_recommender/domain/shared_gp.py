"""The hyperparameters every history task shares: the learned prior's GP before any task's data.

Every history task is an independent draw from one GP whose mean function (an MLP over
configuration ⊕ task descriptors, :mod:`.prior_means`) and kernel (Matérn-5/2 with one lengthscale
per configuration input, ARD) are shared. The kernel sees only the configuration: within one task
the descriptors are constant, so they can only act through the mean, which is where "what works on
datasets like this one" lives. :mod:`.pretraining` fits them; :class:`SharedGp` holds them and the
marginal likelihoods that fit reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gpytorch
import torch

from .errors import SurrogateFailure
from .prior_means import EnsembleMean
from .prior_settings import PriorSettings
from .scoring import Layer

DTYPE = torch.float64


class SharedGp:
    """The mean function, kernel and noise shared by every task, and which configuration columns
    some history task varies (task adaptation lets the others move further, :mod:`.adapt`)."""

    def __init__(self, config_dim: int, descriptor_dim: int, settings: PriorSettings) -> None:
        # an encoder without configuration columns still gives the kernel one (constant) input
        self.config_dim = max(1, config_dim)
        torch.manual_seed(settings.seed)
        self.mean = (
            EnsembleMean(config_dim + descriptor_dim, settings.hidden, max(1, settings.members))
            if settings.learned_mean
            else gpytorch.means.ConstantMean()
        ).to(DTYPE)
        self.kernel = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.MaternKernel(
                nu=2.5, ard_num_dims=self.config_dim, active_dims=tuple(range(self.config_dim))
            )
        ).to(DTYPE)
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood(
            noise_constraint=gpytorch.constraints.GreaterThan(1e-3)
        ).to(DTYPE)
        self.varied = torch.ones(self.config_dim, dtype=torch.bool)

    def parameters(self) -> list[torch.nn.Parameter]:
        """What pre-training fits: the mean's, then the kernel's, then the noise's parameters."""
        return [
            *self.mean.parameters(),
            *self.kernel.parameters(),
            *self.likelihood.parameters(),
        ]

    def mlp_weights(self) -> list[torch.nn.Parameter]:
        """The MLP means' weight matrices (pre-training decays them); none for a constant mean."""
        return [p for n, p in self.mean.named_parameters() if "weight" in n]

    def noise_level(self) -> float:
        """The likelihood's noise variance (normalised scale)."""
        return float(self.likelihood.noise.detach().reshape(-1)[0])

    def mean_numbers(self) -> tuple[list[list[Layer]], float]:
        """The mean as arrays (:class:`~.scoring.PriorScorer`): each MLP member's linear layers,
        or, for a constant mean, no member and its constant."""
        if not isinstance(self.mean, EnsembleMean):
            return [], float(self.mean.constant.detach().reshape(-1)[0])
        members = [
            [
                Layer(layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy())
                for layer in member.modules()
                if isinstance(layer, torch.nn.Linear)
            ]
            for member in self.mean.members
        ]
        return members, 0.0

    def covariance(self, x: torch.Tensor) -> torch.Tensor:
        """The covariance of one task's rows ``x``, noise included."""
        return self.kernel(x).to_dense() + self.likelihood.noise * torch.eye(len(x), dtype=DTYPE)

    def member_means(self, x: torch.Tensor) -> torch.Tensor:
        """The mean at ``x`` with a leading members axis: an ensemble's every member (the
        likelihood is the mean over members of each member's, under one Cholesky), else one."""
        return (
            self.mean.each(x) if isinstance(self.mean, EnsembleMean) else self.mean(x).unsqueeze(0)
        )

    def log_likelihood(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """One task's marginal log-likelihood of ``z`` at ``x`` (what :meth:`tasks_log_likelihood`
        computes for many at once, per point)."""
        chol = pretraining_cholesky(self.covariance(x) + 1e-8 * torch.eye(len(x), dtype=DTYPE))
        means = self.member_means(x)
        w = torch.linalg.solve_triangular(chol, (z.unsqueeze(0) - means).T, upper=False)
        fit = 0.5 * (w**2).sum() / means.shape[0]
        return -fit - torch.log(torch.diagonal(chol)).sum() - 0.5 * len(x) * math.log(2 * math.pi)

    def tasks_log_likelihood(
        self, batch: Sequence[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Each task's marginal log-likelihood per point (:meth:`log_likelihood` / its length),
        all tasks in one batched computation: rows padded to the longest task, a padded row
        independent of every other with unit variance and zero residual, so it adds nothing to
        the fit or the log-determinant. One kernel call and one batched Cholesky per step, not
        one per task (the per-task Python and autograd overhead was most of the pre-training)."""
        n = max(len(z) for _, z in batch)
        x = torch.zeros((len(batch), n, batch[0][0].shape[1]), dtype=DTYPE)
        z = torch.zeros((len(batch), n), dtype=DTYPE)
        real = torch.zeros((len(batch), n), dtype=torch.bool)
        for i, (xi, zi) in enumerate(batch):
            x[i, : len(zi)], z[i, : len(zi)], real[i, : len(zi)] = xi, zi, True
        pairs = real.unsqueeze(-1) & real.unsqueeze(-2)
        k = torch.where(pairs, self.kernel(x).to_dense(), torch.zeros((), dtype=DTYPE))
        diagonal = torch.where(
            real, self.likelihood.noise + 1e-8, torch.ones((), dtype=DTYPE)
        )  # noise (and jitter) on real rows, 1 on padding
        chol = pretraining_cholesky(k + torch.diag_embed(diagonal))
        means = self.member_means(x)  # (members, tasks, n)
        residual = torch.where(real, z.unsqueeze(0) - means, torch.zeros((), dtype=DTYPE))
        w = torch.linalg.solve_triangular(chol, residual.permute(1, 2, 0), upper=False)
        fit = 0.5 * (w**2).sum(dim=(1, 2)) / means.shape[0]
        logdet = torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)  # padding: log 1 = 0
        lengths = real.sum(-1).to(DTYPE)
        return (-fit - logdet - 0.5 * lengths * math.log(2 * math.pi)) / lengths

    def default_unseen_lengthscales(self, inputs: Sequence[torch.Tensor]) -> None:
        """Columns that never vary inside a history task get no gradient, so their lengthscale is
        still its initial value; give them the median learned one (a typical scale, not an accident)
        and remember which they are (task adaptation lets them move further)."""
        d = self.kernel.base_kernel.ard_num_dims
        varied = torch.zeros(d, dtype=torch.bool)
        for x in inputs:
            varied |= (x[:, :d].max(0).values - x[:, :d].min(0).values) > 1e-9
        self.varied = varied
        if varied.any() and not varied.all():
            with torch.no_grad():
                lengthscale = self.kernel.base_kernel.lengthscale.clone()
                lengthscale[..., ~varied] = lengthscale[..., varied].median()
                self.kernel.base_kernel.lengthscale = lengthscale


def pretraining_cholesky(cov: torch.Tensor) -> torch.Tensor:
    """Cholesky factor(s) of pre-training covariances; a failure is the surrogate's."""
    try:
        return torch.linalg.cholesky(cov)
    except RuntimeError as exc:
        raise SurrogateFailure("pre-training", str(exc)) from exc
