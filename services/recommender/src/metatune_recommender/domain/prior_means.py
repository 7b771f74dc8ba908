"""The learned prior's mean function: an MLP over configuration ⊕ task descriptors, or the average
of several (an ensemble), as gpytorch means."""

from __future__ import annotations

import gpytorch
import torch


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
