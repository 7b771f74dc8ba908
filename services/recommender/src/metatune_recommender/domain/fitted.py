"""Fitted priors kept between processes: what identifies one, and the store the recommender asks.

Pre-training the prior on a knowledge base of hundreds of runs takes minutes on a CPU, and the
answer depends only on the history tasks, the candidates their encoders were fitted with and the
settings. :func:`prior_key` digests exactly those, so a store can hand a fitted prior back to any
process that would fit the same one, and a knowledge base that gained a run asks for a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from .history import Task
from .prior import LearnedPrior, PriorSettings


class PriorStore(Protocol):
    """Where fitted priors are kept (``adapters.prior_cache.PriorCache``: files on disk)."""

    def load(self, key: str) -> LearnedPrior | None: ...

    def save(self, key: str, prior: LearnedPrior) -> None: ...


def prior_key(
    tasks: Sequence[Task],
    settings: PriorSettings,
    extra_configs: Sequence[Mapping[str, Any]],
) -> str:
    """A digest of everything :meth:`LearnedPrior.fit` reads: the tasks (name, descriptors,
    configurations and values, in order), the candidates and the settings."""
    payload = {
        "settings": asdict(settings),
        "tasks": [
            [t.name, dict(t.descriptors), list(t.configs), [float(v) for v in t.values]]
            for t in tasks
        ],
        "candidates": list(extra_configs),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()
