"""A Gaussian-process prior learned from history (HyperBO-style), conditioned on a new task's trials.

Pre-training: every history task is an independent draw from one GP whose mean function (a small
MLP over configuration ⊕ task descriptors) and kernel (Matérn-5/2 with one lengthscale per
configuration input, ARD) are shared. Their parameters maximise the sum over tasks of each task's
marginal log-likelihood, per point, so a 1024-row table weighs as much as a 16-run dataset. The
kernel sees only the configuration: within one task the descriptors are constant, so they can
only act through the mean, which is where "what works on datasets like this one" lives.

Conditioning: the new task's raw objective values are mapped onto the prior's normalised scale
(:func:`~.normalise.affine_to_prior`), then the usual GP posterior with the pre-trained
hyperparameters (no refit on a handful of points, which is what makes a learned prior useful).
From :data:`~.adapt.ADAPT_AFTER` results on, the task's own evidence may move them (:mod:`.adapt`).

Transfer sources: a history task that measured the new task's configurations (its candidate pool
is mostly that task's rows: the same search space) knows exactly what the smooth mean only
approximates, e.g. a narrow top one architecture wide. From the task's first result on, its mean
is those tasks' posteriors and the learned mean, weighted by how each orders the results. A task
of another search space is no source: its posterior away from its own rows is the learned mean
again, only flatter, and with a few results it can win the weight by ordering them by chance.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import gpytorch
import numpy as np
import torch

from .adam import Adam
from .adapt import ADAPT_AFTER, adapt
from .encoding import Encoder
from .errors import EmptyHistory, SurrogateFailure
from .history import Task
from .normalise import affine_to_prior, copula_scores
from .portfolio import portfolio_scores
from .prior_settings import PriorSettings
from .scoring import (
    Incumbent,
    Layer,
    PriorScorer,
    ScorerSource,
    array_config_keys,
    overlap_shares,
    similarity_weights,
    space_columns,
)

DTYPE = torch.float64
DEFAULT_SETTINGS = PriorSettings()


class MlpMean(gpytorch.means.Mean):
    """m(x) = MLP(config ⊕ descriptors): the expected normalised score of a configuration on a task."""

    def __init__(self, dim: int, hidden: int = 32) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(dim, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


class EnsembleMean(gpytorch.means.Mean):
    """The average of several MLP means trained from different initialisations.

    One MLP's extrapolation off the history's families depends on its seed (one seed ranks a new
    task's best first, another last); their average keeps what the seeds agree on and pulls the
    rest towards the common level, where the kernel's variance decides."""

    def __init__(self, dim: int, hidden: int, members: int) -> None:
        super().__init__()
        self.members = torch.nn.ModuleList(MlpMean(dim, hidden) for _ in range(members))

    def each(self, x: torch.Tensor) -> torch.Tensor:
        """Every member's mean, shape (members, n)."""
        return torch.stack([m(x) for m in self.members])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.each(x).mean(0)


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


class LearnedPrior:
    """Shared mean function and kernel hyperparameters, fitted on history tasks."""

    def __init__(
        self, config_encoder: Encoder, descriptor_encoder: Encoder, settings: PriorSettings
    ) -> None:
        self.config_encoder = config_encoder
        self.descriptor_encoder = descriptor_encoder
        self.settings = settings
        d_cfg, d_desc = config_encoder.dim, descriptor_encoder.dim
        torch.manual_seed(settings.seed)
        self.mean = (
            EnsembleMean(d_cfg + d_desc, settings.hidden, max(1, settings.members))
            if settings.learned_mean
            else gpytorch.means.ConstantMean()
        ).to(DTYPE)
        self.kernel = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.MaternKernel(
                nu=2.5, ard_num_dims=max(1, d_cfg), active_dims=tuple(range(max(1, d_cfg)))
            )
        ).to(DTYPE)
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood(
            noise_constraint=gpytorch.constraints.GreaterThan(1e-3)
        ).to(DTYPE)
        # multi-task part: squared-exponential kernel over the descriptors, times rho in (0, 1)
        self.joint = bool(settings.joint and d_desc > 0)
        self.task_kernel = gpytorch.kernels.RBFKernel(ard_num_dims=max(1, d_desc)).to(DTYPE)
        self.raw_rho = torch.nn.Parameter(torch.zeros((), dtype=DTYPE))
        self.history_x = torch.zeros((0, d_cfg + d_desc), dtype=DTYPE)
        self.history_alpha = torch.zeros(0, dtype=DTYPE)
        self.tasks_fitted: list[str] = []
        self.sources: list[HistorySource] = []
        self._source_cache: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
        self._residual_cache: dict[Any, torch.Tensor] = {}
        self.final_loss: float | None = None
        self.varied = torch.ones(
            max(1, d_cfg), dtype=torch.bool
        )  # config columns some history task varies

    def noise_level(self) -> float:
        """The likelihood's noise variance (normalised scale)."""
        return float(self.likelihood.noise.detach().reshape(-1)[0])

    def scorer(self, scored: Sequence[Mapping[str, Any]]) -> PriorScorer | None:
        """This prior's numbers as a :class:`~.scoring.PriorScorer` of the candidates ``scored``
        (their configuration columns encoded once); None for a multi-task prior (its history
        residuals need the task kernel: the torch path)."""
        if self.joint:
            return None
        with torch.no_grad():
            members: list[list[Layer]] = []
            constant = 0.0
            if isinstance(self.mean, EnsembleMean):
                for member in self.mean.members:
                    members.append(
                        [
                            Layer(
                                layer.weight.detach().numpy().copy(),
                                layer.bias.detach().numpy().copy(),
                            )
                            for layer in member.modules()
                            if isinstance(layer, torch.nn.Linear)
                        ]
                    )
            else:
                constant = float(self.mean.constant.detach().reshape(-1)[0])
            sources = [
                ScorerSource(
                    s.name,
                    dict(s.descriptors),
                    s.x.numpy().copy(),
                    torch.linalg.solve_triangular(
                        s.chol, torch.eye(len(s.chol), dtype=DTYPE), upper=False
                    ).numpy(),
                    s.alpha.numpy().copy(),
                    s.configs,
                    s.z.numpy().copy(),
                )
                for s in self.sources
            ]
            columns = self.config_encoder.transform(scored)
            if columns.shape[1] == 0:
                columns = np.zeros((len(scored), 1))
            return PriorScorer(
                self.config_encoder,
                self.descriptor_encoder,
                self.settings,
                members,
                constant,
                self.kernel.base_kernel.lengthscale.detach().numpy().reshape(-1).copy(),
                float(self.kernel.outputscale.detach().reshape(-1)[0]),
                self.noise_level(),
                sources,
                [dict(c) for c in scored],
                columns,
            )

    # ------------------------------------------------------------------ encoding
    def inputs(
        self, configs: Sequence[Mapping[str, Any]], descriptors: Mapping[str, Any]
    ) -> torch.Tensor:
        cfg = self.config_encoder.transform(configs)
        if cfg.shape[1] == 0:
            cfg = np.zeros((len(configs), 1))
        desc = self.descriptor_encoder.transform([descriptors])
        full = np.hstack([cfg, np.repeat(desc, len(configs), axis=0)])
        return torch.as_tensor(full, dtype=DTYPE)

    # ------------------------------------------------------------------ fitting
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
        config_rows = [c for t in usable for c in t.configs] + list(extra_configs)
        config_encoder = Encoder.fit(config_rows)
        descriptor_encoder = (
            Encoder.fit([t.descriptors for t in usable], min_category_count=2)
            if settings.descriptors
            else Encoder()
        )
        prior = cls(config_encoder, descriptor_encoder, settings)
        with one_thread():
            prior._train(usable)
        return prior

    def _train(self, tasks: Sequence[Task]) -> None:
        generator = torch.Generator().manual_seed(self.settings.seed)
        torch.manual_seed(self.settings.seed)
        data = [
            (
                self.inputs(t.configs, t.descriptors),
                torch.as_tensor(copula_scores(t.values), dtype=DTYPE),
            )
            for t in tasks
        ]
        params = (
            list(self.mean.parameters())
            + list(self.kernel.parameters())
            + list(self.likelihood.parameters())
        )
        if self.joint:
            params += [*self.task_kernel.parameters(), self.raw_rho]
        optimiser = Adam(params, lr=self.settings.learning_rate)
        mlp_params = [p for n, p in self.mean.named_parameters() if "weight" in n]
        loss = torch.tensor(float("nan"))
        for _ in range(self.settings.iterations):
            optimiser.zero_grad()
            loss = torch.zeros((), dtype=DTYPE)
            batch = []
            for x, z in data:
                if len(z) > self.settings.points_per_task:
                    idx = torch.randperm(len(z), generator=generator)[
                        : self.settings.points_per_task
                    ]
                    x, z = x[idx], z[idx]
                batch.append((x, z))
            if self.joint:  # one GP over every task's points, tasks correlated through rho k_task
                xs = torch.cat([x for x, _ in batch])
                zs = torch.cat([z for _, z in batch])
                ids = torch.cat([torch.full((len(z),), i) for i, (_, z) in enumerate(batch)])
                weights = torch.cat([torch.full((len(z),), 1.0 / len(z)) for _, z in batch])
                loss = -self._log_likelihood(xs, zs, ids, weights) / len(data)
            else:
                loss = -self._tasks_log_likelihood(batch).sum() / len(data)
            if mlp_params:
                loss = loss + self.settings.weight_decay * sum((p**2).sum() for p in mlp_params)
            if not torch.isfinite(loss):
                raise SurrogateFailure("pre-training", f"non-finite loss {loss.item()}")
            loss.backward()
            optimiser.step()
        self.final_loss = float(loss.detach())
        self.tasks_fitted = [t.name for t in tasks]
        self._default_unseen_lengthscales([x for x, _ in data])
        if self.joint:
            self._keep_history(data, generator)
        if self.settings.transfer and self.settings.learned_mean:
            self.sources = [self._source(t, x, z) for t, (x, z) in zip(tasks, data, strict=True)]

    def _source(self, task: Task, x: torch.Tensor, z: torch.Tensor) -> HistorySource:
        with torch.no_grad():
            cov = self._covariance(x) + 1e-8 * torch.eye(len(x), dtype=DTYPE)
            try:
                chol = torch.linalg.cholesky(cov)
            except RuntimeError as exc:
                raise SurrogateFailure("history posterior", str(exc)) from exc
            alpha = torch.cholesky_solve((z - self.mean(x)).unsqueeze(-1), chol).squeeze(-1)
        configs = config_keys(x, space_columns(self.config_encoder))
        return HistorySource(task.name, dict(task.descriptors), x, chol, alpha, configs, z)

    # ------------------------------------------------------------------ transfer
    def source_predictions(self, xc: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Each history task's posterior (mean, sd), shape (tasks, n), at ``xc``'s configurations
        as if they were run on that task; the last row is the learned mean at ``xc`` itself (sd: the
        kernel's). Memoised: the candidates are scored many times in a study."""
        key = (tuple(xc.shape), hash(xc.numpy().tobytes()))
        if key in self._source_cache:
            return self._source_cache[key]
        d = max(1, self.config_encoder.dim)
        means, sds = [], []
        with torch.no_grad():
            for source in self.sources:
                xs = xc.clone()
                xs[:, d:] = source.x[0, d:]
                k = self.kernel(xs, source.x).to_dense()
                means.append(self.mean(xs) + k @ source.alpha)
                v = torch.linalg.solve_triangular(source.chol, k.T, upper=False)
                var = self.kernel(xs, diag=True) - (v**2).sum(0)
                sds.append(torch.sqrt(var.clamp_min(1e-12)))
            means.append(self.mean(xc))
            sds.append(torch.sqrt(self.kernel(xc, diag=True)))
        out = (torch.stack(means).numpy(), torch.stack(sds).numpy())
        if len(self._source_cache) > 64:
            self._source_cache.clear()
        self._source_cache[key] = out
        return out

    def portfolio_scores(self, xc: torch.Tensor, weights: np.ndarray) -> np.ndarray:
        """The history's portfolio score of ``xc``'s configurations over the sources of nonzero
        ``weights`` (:func:`.portfolio.portfolio_scores`)."""
        d = max(1, self.config_encoder.dim)
        sources = [(s.x[:, :d].numpy(), s.z.numpy()) for s in self.sources]
        return portfolio_scores(xc[:, :d].numpy(), sources, weights)

    def config_columns(self, xc: torch.Tensor) -> np.ndarray:
        """The encoded configuration columns of inputs ``xc`` (their descriptors left out)."""
        return xc[:, : max(1, self.config_encoder.dim)].numpy()

    def shared_space(self, pool: torch.Tensor | None) -> np.ndarray:
        """Which sources measured the candidate ``pool``'s search space: at least
        ``source_overlap`` of the pool's configurations are rows of that history task (a table of
        the same grid), or of that task's rows are in the pool (the service's pool: a Sobol design
        plus every configuration the knowledge base measured at the reference budget), compared
        exactly on the encoded configuration columns (``source_overlap`` 0: every source; no
        pool: none)."""
        if self.settings.source_overlap <= 0:
            return np.ones(len(self.sources), dtype=bool)
        if pool is None:
            return np.zeros(len(self.sources), dtype=bool)
        wanted = config_keys(pool, space_columns(self.config_encoder))
        return overlap_shares(
            wanted, [s.configs for s in self.sources], self.settings.source_overlap
        )

    def source_weights(
        self,
        descriptors: Mapping[str, Any],
        x: torch.Tensor,
        y: np.ndarray,
        pool: torch.Tensor | None = None,
    ) -> np.ndarray | None:
        """How much each source (history tasks, then the learned mean) speaks for this task: only
        tasks that measured the ``pool``'s configurations (:meth:`shared_space`; none: the learned
        mean alone, None), by descriptor similarity, then by how well each orders the task's own
        results (``y`` at ``x``), one factor ``exp(-rank_temperature)`` per mis-ordered pair (as
        RGPE ranks its base models)."""
        if not self.sources or len(y) < self.settings.transfer_after:
            return None
        if len(y) and not self.settings.transfer_ei:
            return None
        shared = self.shared_space(pool)
        if not shared.any():
            return None
        weights = similarity_weights(
            descriptors, [s.descriptors for s in self.sources], shared, self.settings.own_weight
        )
        if len(y) >= 2:
            mu, _ = self.source_predictions(x)
            if self.settings.rank_bootstrap > 0:
                return bootstrap_rank_weights(weights, mu, y, self.settings.rank_bootstrap)
            wrong = misordered_pairs(mu[:, None, :], y[None, :])[:, 0]
            weights = weights * np.exp(
                -self.settings.rank_temperature * (wrong - wrong[weights > 0].min())
            )
        return weights / weights.sum()

    def task_mean(
        self, x: torch.Tensor, weights: np.ndarray | None, residual_weight: float = 1.0
    ) -> torch.Tensor:
        """The prior mean of a task: the weighted sources, or the learned mean (plus, with a
        multi-task prior, ``residual_weight`` times what the history's residuals say)."""
        if weights is None:
            return self.mean(x) + residual_weight * self.history_residual(x)
        mu, _ = self.source_predictions(x)
        return torch.as_tensor(weights @ mu, dtype=DTYPE)

    @property
    def rho(self) -> torch.Tensor:
        return torch.sigmoid(self.raw_rho)

    def _task_covariance(
        self, x1: torch.Tensor, x2: torch.Tensor, same: torch.Tensor | None = None
    ) -> torch.Tensor:
        """rho * k_task(descriptors) between rows of different tasks, 1 within a task (``same``:
        boolean matrix, which pairs are one task; None: none are)."""
        d = max(1, self.config_encoder.dim)
        cross = self.rho * self.task_kernel(x1[:, d:], x2[:, d:]).to_dense()
        return cross if same is None else torch.where(same, torch.ones_like(cross), cross)

    def _keep_history(
        self, data: Sequence[tuple[torch.Tensor, torch.Tensor]], generator: torch.Generator
    ) -> None:
        """Keep up to ``history_points`` rows per history task and their weights in the GP
        (alpha = K^-1 (z - m)), so a new task's mean can read the history's residuals."""
        kept = []
        for i, (x, z) in enumerate(data):
            if len(z) > self.settings.history_points:
                idx = torch.randperm(len(z), generator=generator)[: self.settings.history_points]
                x, z = x[idx], z[idx]
            kept.append((x, z, torch.full((len(z),), i)))
        xs = torch.cat([x for x, _, _ in kept])
        zs = torch.cat([z for _, z, _ in kept])
        ids = torch.cat([i for _, _, i in kept])
        with torch.no_grad():
            cov = self._covariance(xs, ids=ids)
            chol = _cholesky(cov)
            self.history_alpha = torch.cholesky_solve(
                (zs - self.mean(xs)).unsqueeze(-1), chol
            ).squeeze(-1)
        self.history_x = xs

    def history_residual(self, x: torch.Tensor) -> torch.Tensor:
        """What the history's measured residuals say about a new task at ``x`` (its descriptors in
        ``x``): the multi-task GP's cross-covariance times the history weights; 0 without one."""
        if not self.joint or len(self.history_alpha) == 0 or len(x) == 0:
            return torch.zeros(len(x), dtype=DTYPE)
        key = ("history", tuple(x.shape), hash(x.detach().numpy().tobytes()))
        if key not in self._residual_cache:
            with torch.no_grad():
                k = self.kernel(x, self.history_x).to_dense()
                k = k * self._task_covariance(x, self.history_x)
                if len(self._residual_cache) > 256:  # a study's candidates and results: few keys
                    self._residual_cache.clear()
                self._residual_cache[key] = k @ self.history_alpha
        return self._residual_cache[key]

    def _default_unseen_lengthscales(self, inputs: Sequence[torch.Tensor]) -> None:
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

    def _covariance(
        self, x1: torch.Tensor, x2: torch.Tensor | None = None, ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Covariance (with noise when ``x2`` is None) of one task's rows, or, with ``ids`` (each
        row's task), of several correlated tasks' rows."""
        if x2 is None:
            k = self.kernel(x1).to_dense()
            if ids is not None:
                k = k * self._task_covariance(x1, x1, ids[:, None] == ids[None, :])
            return k + self.likelihood.noise * torch.eye(len(x1), dtype=DTYPE)
        return self.kernel(x1, x2).to_dense()

    def _log_likelihood(
        self,
        x: torch.Tensor,
        z: torch.Tensor,
        ids: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Marginal log-likelihood of ``z`` at ``x``: one task's, or with ``ids`` several tasks' as
        one multi-task GP; ``weights`` (per row) scale the fit and log-determinant terms so each task
        counts as one (the total is then per task, not per point)."""
        cov = self._covariance(x, ids=ids)
        chol = _pretraining_cholesky(cov + 1e-8 * torch.eye(len(x), dtype=DTYPE))
        means = self._member_means(x)
        w = torch.linalg.solve_triangular(chol, (z.unsqueeze(0) - means).T, upper=False)
        if weights is not None:  # per-row share of the joint likelihood (the chain rule's terms)
            fit = 0.5 * (weights[:, None] * w**2).sum() / means.shape[0]
            logdet = (weights * torch.log(torch.diagonal(chol))).sum()
            return -fit - logdet - 0.5 * float(weights.sum()) * math.log(2 * math.pi)
        fit = 0.5 * (w**2).sum() / means.shape[0]
        return -fit - torch.log(torch.diagonal(chol)).sum() - 0.5 * len(x) * math.log(2 * math.pi)

    def _member_means(self, x: torch.Tensor) -> torch.Tensor:
        """The mean at ``x`` with a leading members axis: an ensemble's every member (the
        likelihood is the mean over members of each member's, under one Cholesky), else one."""
        return (
            self.mean.each(x) if isinstance(self.mean, EnsembleMean) else self.mean(x).unsqueeze(0)
        )

    def _tasks_log_likelihood(
        self, batch: Sequence[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Each task's marginal log-likelihood per point (:meth:`_log_likelihood` / its length),
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
        chol = _pretraining_cholesky(k + torch.diag_embed(diagonal))
        means = self._member_means(x)  # (members, tasks, n)
        residual = torch.where(real, z.unsqueeze(0) - means, torch.zeros((), dtype=DTYPE))
        w = torch.linalg.solve_triangular(chol, residual.permute(1, 2, 0), upper=False)
        fit = 0.5 * (w**2).sum(dim=(1, 2)) / means.shape[0]
        logdet = torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)  # padding: log 1 = 0
        lengths = real.sum(-1).to(DTYPE)
        return (-fit - logdet - 0.5 * lengths * math.log(2 * math.pi)) / lengths

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
            else torch.zeros((0, self._input_dim()), dtype=DTYPE)
        )
        y = np.asarray(values, dtype=float)
        weights = self.source_weights(descriptors, x, y, pool)
        with torch.no_grad():
            if len(y) == 0:
                return TaskPosterior(
                    self, descriptors, x, torch.zeros(0, dtype=DTYPE), 0.0, 1.0, weights=weights
                )
            u = self.task_mean(x, weights).numpy()
            if len(y) == 1:
                return TaskPosterior(
                    self,
                    descriptors,
                    x,
                    torch.as_tensor(u, dtype=DTYPE),
                    float(y[0] - u[0]),
                    1.0,
                    weights=weights,
                )
            cov = self._covariance(x).numpy()
        a, b = affine_to_prior(y, u, cov)
        if len(y) >= ADAPT_AFTER and np.ptp(y) > 0:
            residual = self.history_residual(x) if weights is None and self.joint else None
            fit = adapt(
                self.kernel,
                self.likelihood.noise,
                self.varied,
                x,
                y,
                torch.as_tensor(u, dtype=DTYPE) - (residual if residual is not None else 0.0),
                a,
                b,
                residual,
            )
            return TaskPosterior(
                self,
                descriptors,
                x,
                torch.as_tensor((y - fit.a) / fit.b, dtype=DTYPE),
                fit.a,
                fit.b,
                fit.mean_weight,
                fit.kernel,
                fit.noise,
                weights,
                fit.residual_weight,
            )
        return TaskPosterior(
            self, descriptors, x, torch.as_tensor((y - a) / b, dtype=DTYPE), a, b, weights=weights
        )

    def _input_dim(self) -> int:
        return max(1, self.config_encoder.dim) + self.descriptor_encoder.dim


@contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread while the block runs. Pre-training works on matrices of at
    most ``points_per_task`` rows, too small for threads to pay; and with a thread per core, one
    core taken by another process leaves OpenMP's threads spinning on each other (a cold
    ``metatune recommend`` on the 2-core machine beside one busy process: 3 min 51 s with torch's
    default of 2 threads, 15 s with 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def config_keys(x: torch.Tensor, columns: Sequence[int]) -> frozenset[bytes]:
    """:func:`.scoring.array_config_keys` of a tensor."""
    return array_config_keys(x.numpy(), columns)


def misordered_pairs(mu: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pairs of distinct results each source orders the other way: ``mu`` (sources, samples, n)
    the sources' predictions at each sample's results ``y`` (samples, n); shape (sources, samples)."""
    dy = np.sign(y[:, :, None] - y[:, None, :])
    upper = np.triu(np.ones(dy.shape[1:], dtype=bool), 1)[None] & (dy != 0)
    dm = np.sign(mu[:, :, :, None] - mu[:, :, None, :])
    return np.asarray(((dm != dy[None]) & upper[None]).sum(axis=(2, 3)))


def bootstrap_rank_weights(
    prior: np.ndarray, mu: np.ndarray, y: np.ndarray, samples: int
) -> np.ndarray:
    """RGPE's weights: each source's chance of ordering a bootstrap resample of the task's results
    with the fewest mistakes, ties shared in proportion to ``prior``. With a handful of results
    most resamples tie, so the weights move from the prior only as far as the evidence is
    consistent, not to whichever source happened to order three points right."""
    rng = np.random.default_rng(0)
    index = rng.integers(0, len(y), size=(samples, len(y)))
    wrong = misordered_pairs(mu[:, index], y[index])
    wrong = np.where(prior[:, None] > 0, wrong, np.iinfo(np.int64).max)
    best = (wrong == wrong.min(axis=0, keepdims=True)) * prior[:, None]
    weights = (best / best.sum(axis=0, keepdims=True)).mean(axis=1)
    return np.asarray(weights / weights.sum())


def _pretraining_cholesky(cov: torch.Tensor) -> torch.Tensor:
    """Cholesky factor(s) of pre-training covariances; a failure is the surrogate's."""
    try:
        return torch.linalg.cholesky(cov)
    except RuntimeError as exc:
        raise SurrogateFailure("pre-training", str(exc)) from exc


def _cholesky(cov: torch.Tensor) -> torch.Tensor:
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


@dataclass(frozen=True)
class TaskPosterior(Incumbent):
    """A task's GP posterior on the prior's normalised scale; ``a + b z`` is the raw metric.

    ``kernel`` / ``noise``: the task's own (adapted) hyperparameters, else the pre-trained ones."""

    prior: LearnedPrior
    descriptors: Mapping[str, Any]
    x: torch.Tensor
    z: torch.Tensor
    a: float
    b: float
    mean_weight: float = 1.0  # how much of the learned mean this task keeps
    kernel: gpytorch.kernels.Kernel | None = None
    noise: torch.Tensor | None = None
    weights: np.ndarray | None = None  # over the prior's sources (None: its learned mean alone)
    residual_weight: float = 1.0  # multi-task prior: how much of the history's residuals it keeps

    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        if self.weights is None and self.prior.joint:
            mean = self.mean_weight * self.prior.mean(x)
            return mean + self.residual_weight * self.prior.history_residual(x)
        return self.mean_weight * self.prior.task_mean(x, self.weights)

    def _k(
        self, x1: torch.Tensor, x2: torch.Tensor | None = None, diag: bool = False
    ) -> torch.Tensor:
        kernel = self.kernel if self.kernel is not None else self.prior.kernel
        if diag:
            return kernel(x1, diag=True)
        if x2 is not None:
            return kernel(x1, x2).to_dense()
        noise = self.noise if self.noise is not None else self.prior.likelihood.noise
        return kernel(x1).to_dense() + noise * torch.eye(len(x1), dtype=DTYPE)

    def predict_inputs(self, xc: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            mean_c = self._mean(xc)
            var_c = self._k(xc, diag=True)
            if len(self.z) == 0:
                mu, var = mean_c, var_c
            else:
                chol = _cholesky(self._k(self.x))
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
            self.residual_weight,
        )
