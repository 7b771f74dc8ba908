"""A new dataset's accuracy level, read through its label probe.

Before a study has results, the model's normal score is read on the similar history tasks' own
scales (:meth:`.recommender.Recommender.to_metric`): the 70th percentile of what a configuration
reaches on each, weighted by similarity. Those scales disagree by about ±0.2 (one dataset's best
run reaches 0.98, another's 0.26), and the meta-features that decide similarity say little of how
hard a dataset's labels are. The profiler's probe does (``MetaFeatures.probe_accuracy``: a cheap
classifier's cross-validated accuracy); across the seed's datasets it tracks what LoRA reaches
(correlation 0.87 with the best run). So each similar task's value at a level is moved by how much
easier or harder the probes say the new dataset is: ``value + slope x (probe - task's probe)``,
where ``slope`` is the least-squares slope of that level's values on the probes over every probed
history task. Without a probe on the study or on at least ``MIN_PROBED`` history tasks, the values
are read as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .history import LEVEL_FEATURES, Task

MIN_PROBED = 4  # probed history tasks a slope is fitted on
SLOPE_RANGE = (0.0, 2.0)  # a harder-looking dataset never reads as easier, nor twice as steep


def task_probe(task: Task) -> float | None:
    """The probe its runs' profile measured, or None (profiled before the probe, or no labels)."""
    for run in task.runs:
        features = run.dataset.features
        if features is not None and features.probe_accuracy is not None:
            return features.probe_accuracy
    return None


def probed(history: Sequence[Task], probe: float | None) -> np.ndarray | None:
    """The history tasks' probes (NaN where missing), or None where the probe cannot be used: the
    study has none, or fewer than ``MIN_PROBED`` history tasks have one."""
    if probe is None:
        return None
    probes = np.array([np.nan if (p := task_probe(t)) is None else p for t in history])
    return probes if int(np.isfinite(probes).sum()) >= MIN_PROBED else None


def shifted(values: np.ndarray, probes: np.ndarray, probe: float) -> np.ndarray:
    """Each task's ``values`` (at one level) moved to the study's ``probe``; tasks without a probe
    (NaN) keep theirs."""
    known = np.isfinite(probes)
    x, y = probes[known], values[known]
    spread = float(((x - x.mean()) ** 2).sum())
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / spread) if spread > 0 else 0.0
    slope = min(max(slope, SLOPE_RANGE[0]), SLOPE_RANGE[1])
    return np.where(known, values + slope * (probe - np.nan_to_num(probes)), values)


__all__ = ["LEVEL_FEATURES", "MIN_PROBED", "probed", "shifted", "task_probe"]
