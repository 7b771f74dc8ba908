"""What a knowledge base holds and whether it tells configurations apart (``metatune kb stats``).

Pure: computed from one summary row per run (:func:`summary_row`), whether the rows come from the
store (``KnowledgeStore.stats``) or straight from a file (``metatune kb stats --kb FILE``).

Per dataset with a majority-class baseline (the seed's datasets; the public tables have none) it
measures the two things a recommender needs from its history:

* the share of runs that beat the majority-class baseline: a run that predicts the most common label
  tells the model nothing about its configuration but that it did not learn;
* the noise between seeds of one configuration against the spread between configurations: a
  configuration's advantage smaller than the noise between its seeds cannot be learned. The seed std
  is pooled over the configurations run with more than one seed (the root of their mean variance);
  the spread is the std between configurations of each one's mean metric over its seeds.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field

from metatune.contracts import Contract

from .records import KbRun, RunStatus

NOISE_SHARE = 1 / 3  # a dataset tells configurations apart when std_seed <= spread * NOISE_SHARE


class DatasetQuality(Contract):
    """One dataset's runs: do they beat the baseline, and do configurations differ beyond the noise?"""

    dataset: str
    runs: int = Field(description="completed runs with a metric")
    configs: int = Field(description="distinct configurations among them (the seed aside)")
    majority_baseline: float = Field(description="median majority-class baseline of its runs")
    beats_baseline_share: float = Field(description="share of its runs above their baseline")
    best_margin: float = Field(description="best run's metric - its majority baseline")
    config_spread: float | None = Field(
        description="std between configurations of their mean metric (None: one configuration)"
    )
    repeated_configs: int = Field(description="configurations run with more than one seed")
    seed_std: float | None = Field(
        description="std between seeds of one configuration, pooled over the repeated ones"
    )
    noise_within_spread: bool | None = Field(
        description="seed_std <= config_spread / 3 (None: no repeats or one configuration)"
    )


class KbStats(Contract):
    """What the knowledge base holds (``metatune kb stats --json``)."""

    runs: int
    datasets: int
    configs_per_dataset_min: int = Field(
        description="fewest distinct configurations on one dataset (finished runs)"
    )
    configs_per_dataset_median: float
    configs_per_dataset_max: int
    runs_completed: int
    runs_early_stopped: int
    runs_failed: int
    runs_profile_missing: int
    study_profiles: int
    base_models: int
    runs_per_source: dict[str, int]
    datasets_per_source: dict[str, int]
    datasets_with_majority_baseline: int = Field(
        description="datasets whose runs record the majority-class baseline"
    )
    datasets_beating_majority_baseline: int = Field(
        description="... whose best run scores above that baseline"
    )
    median_margin_over_majority_baseline: float | None = Field(
        description="median over those datasets of (best run's metric - its majority baseline)"
    )
    min_margin_over_majority_baseline: float | None = None
    repeated_configs: int = Field(
        0,
        description="(dataset, configuration) pairs run to the end with more than one seed "
        "(the configuration compared without its seed)",
    )
    seed_noise_std_median: float | None = Field(
        None,
        description="median over those pairs of the final metric's standard deviation between seeds",
    )
    seed_noise_std_max: float | None = None
    per_dataset: list[DatasetQuality] = Field(
        default_factory=list, description="per dataset with a majority baseline: see DatasetQuality"
    )
    datasets_noise_within_spread: int = Field(
        0, description="datasets whose seed std is at most a third of their configurations' spread"
    )
    datasets_noise_measured: int = Field(
        0, description="datasets with repeats and more than one configuration"
    )
    min_beats_baseline_share: float | None = Field(
        None,
        description="lowest share of runs beating the baseline among datasets where any run does",
    )


def config_key(config: Mapping[str, Any]) -> str:
    """A configuration's identity without its seed: repeats with other seeds share it."""
    return json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True)


def summary_row(run: KbRun) -> dict[str, Any]:
    """The fields of ``run`` the statistics read, as the store's query returns them."""
    return {
        "dataset_name": run.dataset.name,
        "base_model": run.base_model,
        "source": run.provenance.source,
        "status": run.status.value,
        "metric": run.metric,
        "majority_baseline": run.majority_baseline,
        "profile_missing": run.profile_missing,
        "config_key": config_key(run.config),
    }


def dataset_quality(name: str, rows: Sequence[Mapping[str, Any]]) -> DatasetQuality:
    """The quality figures of one dataset's completed runs (each with a metric and a baseline)."""
    by_config: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_config[row["config_key"]].append(row["metric"])
    means = [statistics.fmean(metrics) for metrics in by_config.values()]
    variances = [statistics.variance(m) for m in by_config.values() if len(m) > 1]
    spread = statistics.stdev(means) if len(means) > 1 else None
    seed_std = math.sqrt(statistics.fmean(variances)) if variances else None
    margins = [row["metric"] - row["majority_baseline"] for row in rows]
    return DatasetQuality(
        dataset=name,
        runs=len(rows),
        configs=len(by_config),
        majority_baseline=statistics.median(row["majority_baseline"] for row in rows),
        beats_baseline_share=sum(margin > 0 for margin in margins) / len(rows),
        best_margin=max(margins),
        config_spread=spread,
        repeated_configs=len(variances),
        seed_std=seed_std,
        noise_within_spread=(
            None if spread is None or seed_std is None else seed_std <= spread * NOISE_SHARE
        ),
    )


def summarize(rows: Sequence[Mapping[str, Any]], study_profiles: int = 0) -> KbStats:
    """The statistics of the runs whose :func:`summary_row` (or store row) are ``rows``."""
    statuses = Counter(row["status"] for row in rows)
    configs: dict[str, set[str]] = defaultdict(set)
    datasets_per_source: dict[str, set[str]] = defaultdict(set)
    best: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        name = row["dataset_name"]
        datasets_per_source[row["source"]].add(name)
        if row["status"] == RunStatus.failed.value:
            continue
        configs[name].add(row["config_key"])
        if row["metric"] is not None and (name not in best or row["metric"] > best[name]["metric"]):
            best[name] = row
    margins = [
        b["metric"] - b["majority_baseline"]
        for b in best.values()
        if b["majority_baseline"] is not None
    ]
    counts = [len(c) for c in configs.values()]
    completed = [
        row
        for row in rows
        if row["status"] == RunStatus.completed.value and row["metric"] is not None
    ]
    repeats: dict[tuple[str, str], list[float]] = defaultdict(list)
    with_baseline: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in completed:
        repeats[(row["dataset_name"], row["config_key"])].append(row["metric"])
        if row["majority_baseline"] is not None:
            with_baseline[row["dataset_name"]].append(row)
    noise = [statistics.stdev(m) for m in repeats.values() if len(m) > 1]
    quality = [dataset_quality(name, part) for name, part in sorted(with_baseline.items())]
    measured = [q for q in quality if q.noise_within_spread is not None]
    learning = [q.beats_baseline_share for q in quality if q.best_margin > 0]
    return KbStats(
        runs=len(rows),
        datasets=len({row["dataset_name"] for row in rows}),
        configs_per_dataset_min=min(counts, default=0),
        configs_per_dataset_median=float(statistics.median(counts)) if counts else 0.0,
        configs_per_dataset_max=max(counts, default=0),
        runs_completed=statuses[RunStatus.completed.value],
        runs_early_stopped=statuses[RunStatus.early_stopped.value],
        runs_failed=statuses[RunStatus.failed.value],
        runs_profile_missing=sum(bool(row["profile_missing"]) for row in rows),
        study_profiles=study_profiles,
        base_models=len({row["base_model"] for row in rows}),
        runs_per_source=dict(sorted(Counter(row["source"] for row in rows).items())),
        datasets_per_source={
            source: len(names) for source, names in sorted(datasets_per_source.items())
        },
        datasets_with_majority_baseline=len(margins),
        datasets_beating_majority_baseline=sum(margin > 0 for margin in margins),
        median_margin_over_majority_baseline=statistics.median(margins) if margins else None,
        min_margin_over_majority_baseline=min(margins) if margins else None,
        repeated_configs=len(noise),
        seed_noise_std_median=statistics.median(noise) if noise else None,
        seed_noise_std_max=max(noise, default=None),
        per_dataset=quality,
        datasets_noise_within_spread=sum(bool(q.noise_within_spread) for q in measured),
        datasets_noise_measured=len(measured),
        min_beats_baseline_share=min(learning, default=None),
    )


def file_stats(runs: Iterable[KbRun]) -> KbStats:
    """The statistics of a knowledge-base file's runs (no database)."""
    return summarize([summary_row(run) for run in runs])
