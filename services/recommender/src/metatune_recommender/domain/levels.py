"""A new dataset's accuracy level, read through its label probe.

Before a study has results, the model's normal score is read on the similar history tasks' own
scales (``Recommender._to_metric``): the quantile of what a configuration reaches on each,
weighted by similarity. Those scales disagree by about ±0.2 (one dataset's best run reaches 0.98,
another's 0.26), and the meta-features that decide similarity say little of how hard a dataset's
labels are. The profiler's probe does (``MetaFeatures.probe_accuracy``: a cheap classifier's
cross-validated accuracy on 300 rows); across the seed's datasets it tracks what LoRA reaches
(correlation 0.88 with the best run). So each similar task's value at a level is moved by how much
easier or harder the probes say the new dataset is: ``value + slope x (probe - task's probe)``,
where ``slope`` is the least-squares slope of that level's values on the probes over the probed
history tasks, and tasks without a probe are left out of the reading.

The probe is an accuracy, so this applies to metrics on [0, 1] only (accuracy, F1). Without a probe
on the study, or on fewer than ``MIN_PROBED`` history tasks, the scales are read unmoved, and the
interval is calibrated for that case apart (``Recommender.interval_factor``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .history import Task
from .metric_scale import MetricScale

MIN_PROBED = 4  # probed history tasks a slope is fitted on
# the slope's range, in metric units per unit of probe: a dataset whose probe reads harder never
# reads easier, and at most 2 points of metric per point of probe
SLOPE_RANGE = (0.0, 2.0)


def task_probe(task: Task) -> float | None:
    """The probe its runs' profile measured, or None (profiled before the probe, or no labels)."""
    for run in task.runs:
        features = run.dataset.features
        if features is not None and features.probe_accuracy is not None:
            return features.probe_accuracy
    return None


def history_probes(
    history: Sequence[Task], probe: float | None, scale: MetricScale
) -> np.ndarray | None:
    """The history tasks' probes (NaN where missing), or None where the level cannot be read
    through them: the study has no probe, the metric is not on [0, 1], or fewer than
    ``MIN_PROBED`` history tasks have one."""
    if probe is None or (scale.low, scale.high) != (0.0, 1.0):
        return None
    probes = np.array([np.nan if (p := task_probe(t)) is None else p for t in history])
    return probes if int(np.isfinite(probes).sum()) >= MIN_PROBED else None


def shifted(values: np.ndarray, probes: np.ndarray, probe: float) -> np.ndarray:
    """Each probed task's ``values`` (at one level) moved to the study's ``probe`` and kept on
    [0, 1]; a task without a probe (NaN) gets NaN: it says nothing of this dataset's level."""
    known = np.isfinite(probes)
    x, y = probes[known], values[known]
    spread = float(((x - x.mean()) ** 2).sum())
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / spread) if spread > 0 else 0.0
    slope = min(max(slope, SLOPE_RANGE[0]), SLOPE_RANGE[1]) if math.isfinite(slope) else 0.0
    moved = np.clip(values + slope * (probe - probes), 0.0, 1.0)
    return np.asarray(np.where(known, moved, np.nan), dtype=float)


def probed_weights(weights: np.ndarray, probes: np.ndarray) -> np.ndarray:
    """``weights`` over the probed tasks only, renormalised (equal where they gave them none)."""
    known = np.isfinite(probes)
    kept = np.where(known, weights, 0.0)
    total = float(kept.sum())
    return kept / total if total > 0 else known / float(known.sum())


__all__ = ["MIN_PROBED", "history_probes", "probed_weights", "shifted", "task_probe"]
