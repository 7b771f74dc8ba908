"""Adam on torch's functional API, for a fit that runs once per process.

``torch.optim.Adam`` imports ``torch._dynamo`` the first time any of its methods runs (its methods
are wrapped to keep the compiler out), about 1.4 s on the development machine and 14 % of a cold
``metatune recommend``. :func:`torch.optim.adam.adam`, the public functional form the class calls,
does the same arithmetic without that import: this class keeps the state ``torch.optim.Adam`` keeps
(per parameter, created at its first gradient) and steps through it, so a fit is bit for bit the
class's with the same settings (``tests/recommender/test_adam.py`` checks it on the pinned torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.optim.adam import adam


@dataclass
class _State:
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step: torch.Tensor = field(default_factory=lambda: torch.tensor(0.0))


class Adam:
    """``torch.optim.Adam(params, lr)`` with its defaults (betas 0.9 and 0.999, eps 1e-8, no weight
    decay, no AMSGrad): :meth:`zero_grad`, then ``backward()``, then :meth:`step`."""

    betas = (0.9, 0.999)
    eps = 1e-8

    def __init__(self, params: Sequence[torch.Tensor], lr: float) -> None:
        self.params = list(params)
        self.lr = lr
        self.state: dict[int, _State] = {}

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient (the others keep their state)."""
        stepped = [(i, p) for i, p in enumerate(self.params) if p.grad is not None]
        for i, param in stepped:
            if i not in self.state:
                zeros = torch.zeros_like(param, memory_format=torch.preserve_format)
                self.state[i] = _State(zeros, zeros.clone())
        states = [self.state[i] for i, _ in stepped]
        adam(
            [p for _, p in stepped],
            [p.grad for _, p in stepped if p.grad is not None],
            [s.exp_avg for s in states],
            [s.exp_avg_sq for s in states],
            [],
            [s.step for s in states],
            amsgrad=False,
            beta1=self.betas[0],
            beta2=self.betas[1],
            lr=self.lr,
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
        )
