"""The recommender's view of history: tasks, each a set of (configuration, objective) pairs.

A task is one dataset (or one public table's task) on one base model. Everything the surrogate
learns from is a :class:`Task`; knowledge-base runs and public tables are turned into tasks by
:func:`tasks_from_runs`, so the GP code never sees storage formats.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metatune.knowledge.records import KbRun, RunStatus

# the seed says nothing of a configuration's worth; the row cap is what ``train_rows`` says
IGNORED_CONFIG_KEYS = ("seed", "max_train_rows")
RUN_BUDGET_KEYS = ("train_rows", "device")  # what :func:`run_budget` adds to a configuration
# Meta-features that measure the sample as much as the dataset (they grow or shrink with the rows
# profiled: the seed knowledge base profiled 2,000-row samples, a study may send 600 rows) or are
# settings of the profiler, not properties of the data: left out of a task's descriptors, so two
# datasets are compared on what they are, not on how many rows each was profiled on.
SAMPLE_DEPENDENT = frozenset(
    {
        "n_examples",
        "sample_size",
        "vocab_size",
        "ttr",
        "hapax_ratio",
        "words_max",
        "tokens_max",
        "zipf_alpha_se",
        "zipf_xmin",
        "padding_batch_size",
        "mattr_window",
    }
)


# Meta-features that say how high a dataset's results lie rather than what it is like: read by
# :mod:`.levels` to place a new dataset's scale, not compared by similarity.
LEVEL_FEATURES = frozenset({"probe_accuracy"})


def feature_descriptors(features: Mapping[str, Any]) -> dict[str, float]:
    """A profile's scalar meta-features as task descriptors: numbers and flags (``is_pair`` as
    0/1), without the sample-dependent ones (:data:`SAMPLE_DEPENDENT`), the level ones
    (:data:`LEVEL_FEATURES`) and open-ended maps."""
    out: dict[str, float] = {}
    for key, value in features.items():
        if (
            key in SAMPLE_DEPENDENT
            or key in LEVEL_FEATURES
            or value is None
            or isinstance(value, (dict, list, str))
        ):
            continue
        if isinstance(value, (int, float)) and np.isfinite(float(value)):
            out[key] = float(value)
    return out


@dataclass(frozen=True)
class Task:
    """One task's history: configurations, their objective (higher is better) and descriptors."""

    name: str
    descriptors: Mapping[str, float | str]
    configs: list[dict[str, Any]]
    values: np.ndarray
    metric_name: str = "metric"
    base_model: str = ""
    runs: list[KbRun] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.configs) != len(self.values):
            raise ValueError(
                f"task {self.name}: {len(self.configs)} configs but {len(self.values)} values"
            )


def run_descriptors(run: KbRun) -> dict[str, float | str]:
    """Task descriptors of a run: the profiler's meta-features where measured
    (:func:`feature_descriptors`), else the table's descriptors."""
    if run.dataset.features is not None:
        return dict(feature_descriptors(run.dataset.features.model_dump()))
    return dict(run.dataset.descriptors)


def task_key(run: KbRun) -> str:
    return f"{run.dataset.name}|{run.base_model}|{run.task}"


def run_budget(run: KbRun) -> dict[str, Any]:
    """What a run's configuration leaves out of its budget and setting: the training rows its
    epochs run over and the device it trained on. Inputs of the model beside the configuration's
    own budget (``epochs`` or ``max_steps``, ``max_seq_length``), so short CPU runs and long GPU runs
    of one dataset inform one another instead of being averaged."""
    budget: dict[str, Any] = {}
    if run.dataset.n_train:
        budget["train_rows"] = run.dataset.n_train
    if run.hardware is not None and run.hardware.device:
        budget["device"] = run.hardware.device
    return budget


def tasks_from_runs(runs: Iterable[KbRun], *, min_runs: int = 2) -> list[Task]:
    """Group runs into tasks (dataset x base model x task); each configuration carries its run's
    budget (:func:`run_budget`); repeats of a configuration with other seeds at one budget are
    averaged; failed runs and runs without a metric are left out."""
    grouped: dict[str, list[KbRun]] = defaultdict(list)
    for run in runs:
        if run.metric is None or run.status is RunStatus.failed or not np.isfinite(run.metric):
            continue
        grouped[task_key(run)].append(run)
    tasks = []
    for _key, members in sorted(grouped.items()):
        by_config: dict[str, list[dict[str, Any]]] = defaultdict(list)
        metrics: dict[str, list[float]] = defaultdict(list)
        for run in members:
            config = {k: v for k, v in run.config.items() if k not in IGNORED_CONFIG_KEYS}
            config.update(run_budget(run))
            key = repr(sorted(config.items(), key=lambda kv: kv[0]))
            by_config[key].append(config)
            metrics[key].append(float(run.metric))  # type: ignore[arg-type]  # None left out above
        configs = [group[0] for group in by_config.values()]
        values = [float(np.mean(metrics[key])) for key in by_config]
        if len(configs) < min_runs:
            continue
        first = members[0]
        tasks.append(
            Task(
                name=first.dataset.name,
                descriptors=run_descriptors(first),
                configs=configs,
                values=np.asarray(values, dtype=float),
                metric_name=first.metric_name,
                base_model=first.base_model,
                runs=members,
            )
        )
    return tasks
