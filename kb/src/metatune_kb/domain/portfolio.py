"""Configurations that do well across datasets: the cold-start portfolio and the trainer's defaults.

Scores are normalised per dataset (min-max over the dataset's runs, 1 = its best run), so a
dataset where everything scores 0.3 weighs as much as one where everything scores 0.9. The
portfolio is built greedily, as in zero-shot AutoML portfolios (FLAML, Auto-sklearn 2.0): each
next configuration is the one that most raises the mean over datasets of the best normalised
score among the configurations chosen so far, so the entries complement one another instead
of being near-copies of the single best.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from metatune.knowledge.records import KbRun, RunStatus

IGNORED_KEYS = ("seed",)  # a repeat with another seed is the same configuration


def config_key(config: dict[str, Any]) -> str:
    return json.dumps(
        {k: v for k, v in sorted(config.items()) if k not in IGNORED_KEYS}, sort_keys=True
    )


def normalised_scores(runs: Iterable[KbRun]) -> dict[str, dict[str, float]]:
    """dataset -> configuration key -> score in [0, 1] (mean over seeds, min-max within the dataset)."""
    raw: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.metric is None or run.status is RunStatus.failed:
            continue
        raw[run.dataset.name][config_key(run.config)].append(run.metric)
    scores: dict[str, dict[str, float]] = {}
    for dataset, by_config in raw.items():
        means = {key: sum(values) / len(values) for key, values in by_config.items()}
        low, high = min(means.values()), max(means.values())
        span = high - low
        scores[dataset] = {
            key: (value - low) / span if span > 0 else 1.0 for key, value in means.items()
        }
    return scores


@dataclass(frozen=True)
class PortfolioEntry:
    config: dict[str, Any]
    mean_score: (
        float  # mean normalised score of this configuration alone over the datasets it ran on
    )
    portfolio_score: (
        float  # mean over datasets of the best normalised score of the portfolio up to here
    )
    datasets: int  # datasets it ran on


def greedy_portfolio(
    runs: list[KbRun], k: int, *, min_coverage: float = 0.75
) -> list[PortfolioEntry]:
    """Up to ``k`` configurations chosen greedily to maximise the portfolio's mean best score.

    Only configurations measured on at least ``min_coverage`` of the datasets are candidates, so a
    configuration is not preferred for having been tried only where it happened to do well."""
    scores = normalised_scores(runs)
    datasets = sorted(scores)
    if not datasets:
        return []
    configs = {config_key(run.config): run.config for run in runs}
    candidates = [
        key
        for key in configs
        if sum(key in scores[d] for d in datasets) >= min_coverage * len(datasets)
    ]
    best = dict.fromkeys(datasets, 0.0)
    chosen: list[PortfolioEntry] = []
    for _ in range(min(k, len(candidates))):

        def gain(key: str) -> float:
            return sum(max(best[d], scores[d].get(key, 0.0)) for d in datasets) / len(datasets)

        key = max(
            (c for c in candidates if all(c != config_key(e.config) for e in chosen)), key=gain
        )
        covered = [d for d in datasets if key in scores[d]]
        for d in datasets:
            best[d] = max(best[d], scores[d].get(key, 0.0))
        config = {k_: v for k_, v in configs[key].items() if k_ not in IGNORED_KEYS}
        chosen.append(
            PortfolioEntry(
                config=config,
                mean_score=sum(scores[d][key] for d in covered) / len(covered),
                portfolio_score=sum(best.values()) / len(datasets),
                datasets=len(covered),
            )
        )
    return chosen
