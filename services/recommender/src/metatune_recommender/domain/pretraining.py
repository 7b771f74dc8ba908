"""Pre-training the shared GP (:class:`~.shared_gp.SharedGp`) on the history tasks.

Its parameters maximise the sum over tasks of each task's marginal log-likelihood per point, so a
1024-row table weighs as much as a 16-run dataset; each step subsamples ``points_per_task`` rows
of every task (a bounded cost, an equal weight per task) and computes every task's likelihood in
one batched Cholesky (:meth:`~.shared_gp.SharedGp.tasks_log_likelihood`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from .adam import Adam
from .errors import SurrogateFailure
from .prior_settings import PriorSettings
from .shared_gp import SharedGp


def pretrain(
    gp: SharedGp, data: Sequence[tuple[torch.Tensor, torch.Tensor]], settings: PriorSettings
) -> float:
    """Fit ``gp`` to the tasks' (inputs, normal scores) ``data`` by ``settings.iterations`` Adam
    steps; the last step's loss (negative mean log-likelihood per point, plus the MLP's weight
    decay). A non-finite loss is a :class:`~.errors.SurrogateFailure`."""
    generator = torch.Generator().manual_seed(settings.seed)
    torch.manual_seed(settings.seed)
    optimiser = Adam(gp.parameters(), lr=settings.learning_rate)
    mlp_params = gp.mlp_weights()
    loss = torch.tensor(float("nan"))
    for _ in range(settings.iterations):
        optimiser.zero_grad()
        batch = []
        for x, z in data:
            if len(z) > settings.points_per_task:
                idx = torch.randperm(len(z), generator=generator)[: settings.points_per_task]
                x, z = x[idx], z[idx]
            batch.append((x, z))
        loss = -gp.tasks_log_likelihood(batch).sum() / len(data)
        if mlp_params:
            loss = loss + settings.weight_decay * sum((p**2).sum() for p in mlp_params)
        if not torch.isfinite(loss):
            raise SurrogateFailure("pre-training", f"non-finite loss {loss.item()}")
        loss.backward()
        optimiser.step()
    return float(loss.detach())


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
