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

IGNORED_CONFIG_KEYS = ("seed",)


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
    """Task descriptors of a run: the profiler's meta-features where measured, else the table's descriptors.

    Only scalar meta-features are used (``script_mix`` and ``extra`` are open-ended maps)."""
    if run.dataset.features is not None:
        data = run.dataset.features.model_dump()
        return {
            key: float(value)
            for key, value in data.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None
        }
    return dict(run.dataset.descriptors)


def task_key(run: KbRun) -> str:
    return f"{run.dataset.name}|{run.base_model}|{run.task}"


def tasks_from_runs(runs: Iterable[KbRun], *, min_runs: int = 2) -> list[Task]:
    """Group runs into tasks (dataset x base model x task); repeats of a configuration with other
    seeds are averaged; failed runs and runs without a metric are left out."""
    grouped: dict[str, list[KbRun]] = defaultdict(list)
    for run in runs:
        if run.metric is None or run.status is RunStatus.failed or not np.isfinite(run.metric):
            continue
        grouped[task_key(run)].append(run)
    tasks = []
    for _key, members in sorted(grouped.items()):
        by_config: dict[str, list[KbRun]] = defaultdict(list)
        for run in members:
            config = {k: v for k, v in run.config.items() if k not in IGNORED_CONFIG_KEYS}
            by_config[repr(sorted(config.items(), key=lambda kv: kv[0]))].append(run)
        configs, values = [], []
        for group in by_config.values():
            configs.append(
                {k: v for k, v in group[0].config.items() if k not in IGNORED_CONFIG_KEYS}
            )
            values.append(float(np.mean([run.metric for run in group])))
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
