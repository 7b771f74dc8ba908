"""A Gaussian-process prior learned from history (HyperBO-style), conditioned on a new task's trials.

:class:`LearnedPrior` is made of named parts, each in a module of its own:

- :class:`~.prior_inputs.PriorInputs`: the encoders, configuration ⊕ task descriptors;
- :class:`~.shared_gp.SharedGp`: the mean function, kernel and noise every history task shares,
  fitted by :func:`~.pretraining.pretrain` (each task's marginal log-likelihood per point);
- :class:`~.sources.TransferSources`: the fitted source tasks, each history task's posterior
  under those hyperparameters, and the transfer mean they give a task of their search space;
- :class:`~.task_weighting.TaskWeighting`: how much each source speaks for a task;
- :class:`~.posterior.TaskPosterior`: a task's posterior, what acquisition reads.

Conditioning: the new task's raw objective values are mapped onto the prior's normalised scale
(:func:`~.normalise.affine_to_prior`), then the usual GP posterior with the pre-trained
hyperparameters (no refit on a handful of points, which is what makes a learned prior useful).
From :data:`~.adapt.ADAPT_AFTER` results on, the task's own evidence may move them (:mod:`.adapt`).
From the task's first result on (``transfer_after``), where history tasks measured its search
space, its mean is those tasks' posteriors and the learned mean, weighted by how each orders
the results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .adapt import ADAPT_AFTER, adapt
from .errors import EmptyHistory
from .history import Task
from .normalise import affine_to_prior, copula_scores
from .posterior import TaskPosterior
from .pretraining import one_thread, pretrain
from .prior_inputs import PriorInputs
from .prior_settings import PriorSettings
from .scoring import PriorScorer, space_columns
from .shared_gp import DTYPE, SharedGp
from .sources import HistorySource, TransferSources
from .task_weighting import TaskWeighting

DEFAULT_SETTINGS = PriorSettings()

__all__ = ["DEFAULT_SETTINGS", "LearnedPrior", "PriorSettings", "TaskPosterior"]


class LearnedPrior:
    """Shared mean function and kernel hyperparameters fitted on history tasks (``gp``), the
    tasks as transfer sources (``transfer``) and the rule that weighs them for a task."""

    def __init__(
        self,
        encoding: PriorInputs,
        settings: PriorSettings,
        gp: SharedGp,
        transfer: TransferSources,
        tasks_fitted: Sequence[str],
        final_loss: float,
    ) -> None:
        self.encoding = encoding
        self.settings = settings
        self.gp = gp
        self.transfer = transfer
        self.weighting = TaskWeighting(settings)
        self.tasks_fitted = list(tasks_fitted)
        self.final_loss = final_loss

    @classmethod
    def fit(
        cls,
        tasks: Sequence[Task],
        settings: PriorSettings = DEFAULT_SETTINGS,
        extra_configs: Sequence[Mapping[str, Any]] = (),
    ) -> LearnedPrior:
        """Pre-train on ``tasks`` (each needs >= 2 distinct values). ``extra_configs`` (the candidates
        to be scored later) join the encoder's fit so their columns exist."""
        usable = [t for t in tasks if len(t.values) >= 2 and np.ptp(t.values) > 0]
        if not usable:
            raise EmptyHistory("no history task with two or more distinct results")
        encoding = PriorInputs.fit(usable, settings, extra_configs)
        gp = SharedGp(encoding.config_encoder.dim, encoding.descriptor_encoder.dim, settings)
        space = space_columns(encoding.config_encoder)
        with one_thread():
            data = [
                (
                    encoding.inputs(t.configs, t.descriptors),
                    torch.as_tensor(copula_scores(t.values), dtype=DTYPE),
                )
                for t in usable
            ]
            final_loss = pretrain(gp, data, settings)
            gp.default_unseen_lengthscales([x for x, _ in data])
            sources = (
                [
                    HistorySource.fit(gp, t, x, z, space)
                    for t, (x, z) in zip(usable, data, strict=True)
                ]
                if settings.transfer and settings.learned_mean
                else []
            )
        transfer = TransferSources(gp, sources, space, settings.source_overlap)
        return cls(encoding, settings, gp, transfer, [t.name for t in usable], final_loss)

    # ------------------------------------------------------------------ what acquisition reads
    def inputs(
        self, configs: Sequence[Mapping[str, Any]], descriptors: Mapping[str, Any]
    ) -> torch.Tensor:
        return self.encoding.inputs(configs, descriptors)

    def noise_level(self) -> float:
        return self.gp.noise_level()

    def config_columns(self, xc: torch.Tensor) -> np.ndarray:
        """The encoded configuration columns of inputs ``xc`` (their descriptors left out)."""
        return xc[:, : self.encoding.config_dim].numpy()

    def source_predictions(self, xc: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        return self.transfer.predictions(xc)

    def portfolio_scores(self, xc: torch.Tensor, weights: np.ndarray) -> np.ndarray:
        return self.transfer.portfolio_scores(xc, weights)

    def task_mean(self, x: torch.Tensor, weights: np.ndarray | None) -> torch.Tensor:
        return self.transfer.task_mean(x, weights)

    # ------------------------------------------------------------------ conditioning
    def condition(
        self,
        descriptors: Mapping[str, Any],
        configs: Sequence[Mapping[str, Any]],
        values: Sequence[float],
        pool: torch.Tensor | None = None,
    ) -> TaskPosterior:
        """The posterior for a task with these descriptors after observing ``values`` at ``configs``;
        ``pool`` (the candidates' inputs) decides which history tasks are transfer sources.

        From :data:`~.adapt.ADAPT_AFTER` results on, the kernel, noise and the learned mean's weight
        are adapted to the task (MAP around the pre-trained values, :func:`~.adapt.adapt`)."""
        x = (
            self.inputs(configs, descriptors)
            if configs
            else torch.zeros((0, self.encoding.dim), dtype=DTYPE)
        )
        y = np.asarray(values, dtype=float)
        weights = self.weighting.weights(self.transfer, descriptors, x, y, pool)
        with torch.no_grad():
            if len(y) == 0:
                z0 = torch.zeros(0, dtype=DTYPE)
                return TaskPosterior(self, descriptors, x, z0, 0.0, 1.0, weights=weights)
            u = self.task_mean(x, weights).numpy()
            if len(y) == 1:
                z1 = torch.as_tensor(u, dtype=DTYPE)
                return TaskPosterior(
                    self, descriptors, x, z1, float(y[0] - u[0]), 1.0, weights=weights
                )
            cov = self.gp.covariance(x).numpy()
        a, b = affine_to_prior(y, u, cov)
        if len(y) >= ADAPT_AFTER and np.ptp(y) > 0:
            mean = torch.as_tensor(u, dtype=DTYPE)
            fit = adapt(self.gp.kernel, self.gp.likelihood.noise, self.gp.varied, x, y, mean, a, b)
            z = torch.as_tensor((y - fit.a) / fit.b, dtype=DTYPE)
            return TaskPosterior(
                self,
                descriptors,
                x,
                z,
                fit.a,
                fit.b,
                fit.mean_weight,
                fit.kernel,
                fit.noise,
                weights,
            )
        z = torch.as_tensor((y - a) / b, dtype=DTYPE)
        return TaskPosterior(self, descriptors, x, z, a, b, weights=weights)

    # ------------------------------------------------------------------ the pre-result path
    def scorer(self, scored: Sequence[Mapping[str, Any]]) -> PriorScorer:
        """This prior's numbers as a :class:`~.scoring.PriorScorer` of the candidates ``scored``
        (their configuration columns encoded once)."""
        with torch.no_grad():
            members, constant = self.gp.mean_numbers()
            columns = self.encoding.config_encoder.transform(scored)
            if columns.shape[1] == 0:
                columns = np.zeros((len(scored), 1))
            kernel = self.gp.kernel
            return PriorScorer(
                self.encoding.config_encoder,
                self.encoding.descriptor_encoder,
                self.settings,
                members,
                constant,
                kernel.base_kernel.lengthscale.detach().numpy().reshape(-1).copy(),
                float(kernel.outputscale.detach().reshape(-1)[0]),
                self.noise_level(),
                [s.numbers() for s in self.transfer.sources],
                [dict(c) for c in scored],
                columns,
            )
