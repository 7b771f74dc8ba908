"""Task-level adaptation: the pre-trained kernel, noise and mean weight, nudged by the task's own results.

The prior learned across tasks is right about most tasks and confidently wrong about a task unlike
its history (a low-resource language pair whose best models are the smallest; a table whose
hyperparameters no history task varied). Conditioning alone cannot fix that: with the pre-trained
lengthscales the posterior explores only near what the mean likes. So once a task has
:data:`ADAPT_AFTER` results, its lengthscales, output scale, noise, the learned mean's weight and
the affine map to the raw metric are fitted to those results by maximum a posteriori, with priors
centred on the pre-trained values: they stay put while the task agrees with its history and move
as far as its evidence carries them otherwise. Columns no history task varied get a wider prior.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import gpytorch
import numpy as np
import torch

DTYPE = torch.float64
ADAPT_AFTER = (
    8  # results before the task's own hyperparameters are fitted (fewer: too noisy to move them)
)
LOG_SD = 1.0  # prior sd of log lengthscale, output scale and noise around the pre-trained values
UNSEEN_LOG_SD = (
    2.0  # the same for columns no history task varied (their pre-trained value is a default)
)
MEAN_WEIGHT_SD = 0.5  # prior N(1, sd^2) on the learned mean's weight
LOG_B_SD = 3.0  # weak prior on the affine scale around its maximum-likelihood start
MAX_ITER = 40


@dataclass(frozen=True)
class Adapted:
    kernel: gpytorch.kernels.ScaleKernel
    noise: torch.Tensor
    a: float
    b: float
    mean_weight: float


def adapt(
    pretrained: gpytorch.kernels.ScaleKernel,
    noise: torch.Tensor,
    varied: torch.Tensor,
    x: torch.Tensor,
    y: np.ndarray,
    mean_at_x: torch.Tensor,
    a0: float,
    b0: float,
) -> Adapted:
    """MAP hyperparameters for one task's results ``y`` (raw) at inputs ``x``, starting from the
    prior's ``pretrained`` kernel and ``noise``; ``varied``: the input columns some history task
    varied; ``a0``, ``b0``: the affine map under the pre-trained hyperparameters (the start). Falls
    back to the pre-trained values if the fit fails numerically."""
    kernel = copy.deepcopy(pretrained)
    noise0 = noise.detach().reshape(())
    # the pre-trained kernel itself: the copy is being optimised and may be left half-way
    fallback = Adapted(pretrained, noise0, a0, b0, 1.0)
    base = kernel.base_kernel
    log_ls0 = torch.log(base.lengthscale.detach()).reshape(-1)
    log_os0 = torch.log(kernel.outputscale.detach())
    ls_sd = torch.where(varied[: len(log_ls0)], LOG_SD, UNSEEN_LOG_SD).to(DTYPE)
    yt = torch.as_tensor(y, dtype=DTYPE)
    da = torch.zeros((), dtype=DTYPE, requires_grad=True)  # a = a0 + b0 * da
    dlog_b = torch.zeros((), dtype=DTYPE, requires_grad=True)
    weight = torch.ones((), dtype=DTYPE, requires_grad=True)
    log_noise = torch.log(noise0).clone().requires_grad_(True)
    params = [*kernel.parameters(), da, dlog_b, weight, log_noise]
    eye = torch.eye(len(y), dtype=DTYPE)

    def objective() -> torch.Tensor:
        b = b0 * torch.exp(dlog_b)
        r = (yt - (a0 + b0 * da)) / b - weight * mean_at_x
        cov = kernel(x).to_dense() + (torch.exp(log_noise) + 1e-8) * eye
        chol = torch.linalg.cholesky(cov)
        w = torch.linalg.solve_triangular(chol, r.unsqueeze(-1), upper=False)
        nll = 0.5 * (w**2).sum() + torch.log(torch.diagonal(chol)).sum() + len(y) * torch.log(b)
        penalty = (
            0.5 * (((torch.log(base.lengthscale).reshape(-1) - log_ls0) / ls_sd) ** 2).sum()
            + 0.5 * ((torch.log(kernel.outputscale) - log_os0) / LOG_SD) ** 2
            + 0.5 * ((log_noise - torch.log(noise0)) / LOG_SD) ** 2
            + 0.5 * ((weight - 1.0) / MEAN_WEIGHT_SD) ** 2
            + 0.5 * (dlog_b / LOG_B_SD) ** 2
        )
        return nll + penalty

    optimiser = torch.optim.LBFGS(params, max_iter=MAX_ITER, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    try:
        optimiser.step(closure)
    except RuntimeError:  # a Cholesky failure mid-search: keep what the history says
        return fallback
    values = [float(p.detach().reshape(-1)[0]) for p in (da, dlog_b, weight, log_noise)]
    if not all(math.isfinite(v) for v in values) or not torch.isfinite(base.lengthscale).all():
        return fallback
    for p in kernel.parameters():
        p.requires_grad_(False)
    return Adapted(
        kernel,
        torch.exp(log_noise.detach()).clamp_min(1e-6),
        a0 + b0 * values[0],
        b0 * math.exp(values[1]),
        float(np.clip(values[2], 0.0, 2.0)),
    )
