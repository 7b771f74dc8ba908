"""The prior's Adam (domain/adam.py) against ``torch.optim.Adam`` on the pinned torch: the same
parameters after every step, bit for bit, and no ``torch._dynamo`` import on the way."""

from __future__ import annotations

import subprocess
import sys

import torch

from metatune_recommender.domain.adam import Adam


def _fit(make_optimiser: type, steps: int = 40) -> list[torch.Tensor]:
    torch.manual_seed(0)
    weights = torch.randn(6, dtype=torch.float64, requires_grad=True)
    scale = torch.randn(3, requires_grad=True)
    late = torch.zeros(2, requires_grad=True)  # no gradient for the first steps: no state yet
    params = [weights, scale, late]
    optimiser = make_optimiser(params, lr=0.05)
    trajectory = []
    for step in range(steps):
        optimiser.zero_grad()
        loss = (weights**2).sum() + scale.sin().sum() * weights.sum().float()
        if step >= 10:
            loss = loss + (late - 1.0).pow(2).sum()
        loss.backward()
        optimiser.step()
        trajectory.append(torch.cat([p.detach().double() for p in params]))
    return trajectory


def test_every_step_is_torchs_adam_bit_for_bit() -> None:
    ours, torchs = _fit(Adam), _fit(torch.optim.Adam)
    assert len(ours) == len(torchs)
    for mine, theirs in zip(ours, torchs, strict=True):
        assert torch.equal(mine, theirs)
    assert not torch.equal(ours[0], ours[-1])  # it moved


def test_stepping_imports_no_compiler() -> None:
    probe = (
        "import sys, torch\n"
        "from metatune_recommender.domain.adam import Adam\n"
        "p = torch.ones(3, requires_grad=True)\n"
        "o = Adam([p], lr=0.1)\n"
        "(p ** 2).sum().backward()\n"
        "o.step()\n"
        "assert p.detach().lt(1).all()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "False"
