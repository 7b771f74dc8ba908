"""Fitted priors kept between processes: what identifies one, and the store the recommender asks.

Pre-training the prior on a knowledge base of hundreds of runs takes minutes on a CPU, and the
answer depends only on the history tasks, the candidates their encoders were fitted with and the
settings. :func:`prior_key` digests exactly those, so a store can hand a fitted prior back to any
process that would fit the same one, and a knowledge base that gained a run asks for a new one.

A prior's :class:`~.scoring.PriorScorer` (its numbers and candidates, for the pre-result path) is
kept beside it under :func:`scorer_key`: a digest of what the candidates and the prior are derived
from (the history tasks, every run's configuration with the budget it was measured at, how many
Sobol candidates, the settings), so reading it back needs neither torch nor the Sobol design.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from .history import Task
from .levels import task_probe
from .prior_settings import PriorSettings
from .scoring import PriorScorer

if TYPE_CHECKING:  # the prior needs torch; its store's callers need not import it
    from .prior import LearnedPrior


class PriorStore(Protocol):
    """Where fitted priors are kept (``adapters.prior_cache.PriorCache``: files on disk)."""

    def load(self, key: str) -> LearnedPrior | None: ...

    def save(self, key: str, prior: LearnedPrior) -> None: ...

    def load_scorer(self, key: str) -> PriorScorer | None: ...

    def save_scorer(self, key: str, scorer: PriorScorer) -> None: ...


def _digest(settings: PriorSettings, tasks: Sequence[Task], **more: Any) -> str:
    """SHA-256 of the settings, the tasks (name, descriptors, configurations and values, in
    order) and ``more``, as canonical JSON."""
    payload = {
        "settings": asdict(settings),
        "tasks": [
            [t.name, dict(t.descriptors), list(t.configs), [float(v) for v in t.values]]
            for t in tasks
        ],
        **more,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def prior_key(
    tasks: Sequence[Task],
    settings: PriorSettings,
    extra_configs: Sequence[Mapping[str, Any]],
) -> str:
    """A digest of everything :meth:`LearnedPrior.fit` reads: the tasks (name, descriptors,
    configurations and values, in order), the candidates and the settings."""
    return _digest(settings, tasks, candidates=list(extra_configs))


def scorer_key(
    tasks: Sequence[Task],
    settings: PriorSettings,
    measured: Sequence[tuple[Sequence[Any], Mapping[str, Any]]],
    candidates: int,
) -> str:
    """A digest of what a :class:`~.scoring.PriorScorer` is derived from: the history tasks (as
    :func:`prior_key` digests them), each run's (budget key, configuration) in order (they decide
    the reference budget and the measured candidates), the number of Sobol candidates, the
    settings, and the tasks' label probes (the interval factor kept with the scorer was calibrated
    through them, :mod:`.levels`)."""
    return _digest(
        settings,
        tasks,
        measured=[[list(budget), dict(config)] for budget, config in measured],
        sobol=candidates,
        probes=[task_probe(t) for t in tasks],
    )
