"""Learning-curve early stopping: predict a run's final metric from its first evaluations.

From the prefix of a run's curve (its metric and validation loss at the knowledge base's fixed
step fractions, interpolated when the run evaluates at other steps) and the shape of its
learning-rate schedule, one gradient-boosted model per prefix length predicts how much the metric
still moves by the end of the run. The interval is split-conformal: the model's residuals on
datasets it was not fitted on (grouped K-fold, one group per dataset) give the upper bound at any
confidence, so the bound is calibrated for a *new* dataset, which is what a study is.

The decision rule: stop when the upper bound of the final metric at the stated confidence is
below the study's best so far (minus a margin). With no study best (the first trial) it never
stops.

The fitted model is plain JSON (the trees' arrays, the conformal residuals and the provenance),
so loading it runs no pickle and does not depend on the scikit-learn version that fitted it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metatune.contracts import LoraConfig, LrSchedule
from metatune.knowledge.errors import KnowledgeBaseError

from .trainer import Evaluation, lr_lambda

MODEL_FORMAT = 2  # 2: the learning-rate extrapolation features
DEFAULT_GRID = (
    0.125,
    0.25,
    0.375,
    0.5,
    0.625,
    0.75,
    0.875,
)  # the seed KB's evaluations before the end
DEFAULT_CONFIDENCE = 0.95
SCALE_FLOOR = 0.01  # least residual size (one accuracy point): a flat curve still gets a band
LR_RESOLUTION = 200  # steps the schedule is sampled at to measure the learning rate still to come


class CurveModelError(KnowledgeBaseError, ValueError):
    """A curve-stop model file that cannot be used (another format, a broken file, too few runs to fit)."""


# ----------------------------------------------------------------- curves and features
@dataclass(frozen=True)
class Curve:
    """A run's evaluations as (fraction of planned steps, metric, validation loss), fraction 0 first."""

    points: tuple[tuple[float, float, float | None], ...]

    @classmethod
    def from_evaluations(
        cls,
        evaluations: Iterable[tuple[int, Evaluation]],
        total_steps: int,
        metric: str = "accuracy",
    ) -> Curve | None:
        points = []
        for step, evaluation in evaluations:
            value = getattr(evaluation, metric, None)
            if value is None:
                return None
            points.append((step / max(total_steps, 1), float(value), evaluation.loss))
        return cls(tuple(sorted(points))) if points else None

    def prefix(self, grid: Sequence[float]) -> tuple[list[float], list[float]] | None:
        """Metric and loss at 0 and at every grid fraction the run has reached (linear interpolation)."""
        if not self.points or self.points[0][0] > 0:
            return None  # a curve without its step-0 evaluation cannot be placed on the grid
        xs = [p[0] for p in self.points]
        reached = [f for f in grid if f <= xs[-1] + 1e-9]
        if not reached:
            return None
        at = [0.0, *reached]
        metric = np.interp(at, xs, [p[1] for p in self.points]).tolist()
        losses = [p[2] if p[2] is not None else math.nan for p in self.points]
        loss = np.interp(at, xs, losses).tolist()
        return metric, loss


def lr_still_to_come(schedule: LrSchedule | str, warmup_ratio: float, fraction: float) -> float:
    """Share of the schedule's total learning rate (area under the multiplier) after ``fraction``."""
    factor = lr_lambda(LrSchedule(schedule), round(warmup_ratio * LR_RESOLUTION), LR_RESOLUTION)
    values = [factor(s) for s in range(LR_RESOLUTION)]
    total = sum(values)
    cut = min(LR_RESOLUTION, round(fraction * LR_RESOLUTION))
    return sum(values[cut:]) / total if total > 0 else 0.0


@dataclass(frozen=True)
class RunShape:
    """What the predictor knows about a run besides its curve: how much learning rate is left."""

    learning_rate: float
    lr_schedule: str = "linear"
    warmup_ratio: float = 0.0

    @classmethod
    def of(cls, config: LoraConfig | dict[str, Any]) -> RunShape:
        c = config if isinstance(config, dict) else config.model_dump(mode="json")
        return cls(
            float(c["learning_rate"]),
            str(c.get("lr_schedule", "linear")),
            float(c.get("warmup_ratio", 0.0)),
        )


def features(
    metric: list[float], loss: list[float], fraction: float, shape: RunShape, previous: float = 0.0
) -> list[float]:
    """One row for the model of prefix length ``len(metric) - 1`` (metric[0], loss[0]: step 0).

    ``previous`` is the grid fraction of the evaluation before the last (0 for the first). Besides
    the curve's own summary, two extrapolations: the metric gained per unit of learning rate spent
    (over the whole prefix, and over its last interval) times the learning rate still to come. A
    run that climbs steadily under a constant rate is then told apart from one that has levelled
    off, which a tree of depth 2 cannot work out from the slope and the rate left separately.
    """
    seen = metric[1:]
    last = seen[-1]
    prev = metric[-2]
    l0 = loss[0] if loss[0] and not math.isnan(loss[0]) else math.nan
    to_come = lr_still_to_come(shape.lr_schedule, shape.warmup_ratio, fraction)
    spent = 1.0 - to_come
    spent_before = 1.0 - lr_still_to_come(shape.lr_schedule, shape.warmup_ratio, previous)
    return [
        last,
        max(seen),
        sum(seen) / len(seen),
        last - prev,
        last - metric[0],
        metric[0],
        loss[-1] / l0 if l0 else math.nan,
        (loss[-1] - min(loss)) / l0 if l0 else math.nan,
        math.log10(shape.learning_rate),
        to_come,
        _extrapolate(last - metric[0], spent, to_come),
        _extrapolate(last - prev, spent - spent_before, to_come),
    ]


def _extrapolate(gain: float, lr_spent: float, lr_to_come: float) -> float:
    """Gain per unit of learning rate spent, carried over the rate still to come (bounded: metrics are shares)."""
    if lr_spent <= 1e-6:
        return 0.0
    return max(-1.0, min(1.0, gain / lr_spent * lr_to_come))


# ----------------------------------------------------------------- the model
@dataclass
class _Trees:
    """A fitted gradient-boosting regressor as arrays (predicts exactly as scikit-learn did)."""

    init: float
    rate: float
    trees: list[dict[str, list[Any]]]

    @classmethod
    def of(cls, model: Any) -> _Trees:
        trees = []
        for estimator in model.estimators_[:, 0]:
            t = estimator.tree_
            trees.append(
                {
                    "left": t.children_left.tolist(),
                    "right": t.children_right.tolist(),
                    "feature": t.feature.tolist(),
                    "threshold": t.threshold.tolist(),
                    "value": t.value[:, 0, 0].tolist(),
                }
            )
        return cls(float(model.init_.constant_.ravel()[0]), float(model.learning_rate), trees)

    def predict(self, row: Sequence[float]) -> float:
        total = self.init
        for t in self.trees:
            node = 0
            while t["left"][node] != -1:
                node = (
                    t["left"][node]
                    if row[t["feature"][node]] <= t["threshold"][node]
                    else t["right"][node]
                )
            total += self.rate * t["value"][node]
        return total


@dataclass
class _PrefixModel:
    trees: _Trees
    residuals: list[float]  # out-of-dataset residuals (final - predicted) / scale, sorted
    scale: _Trees | None = (
        None  # predicts the residual's size (normalised conformal); None: one width for all
    )

    def width(self, row: Sequence[float], confidence: float) -> float:
        size = max(self.scale.predict(row), SCALE_FLOOR) if self.scale is not None else 1.0
        return conformal_quantile(self.residuals, confidence) * size


@dataclass(frozen=True)
class Prediction:
    final: float  # point prediction of the final metric
    upper: float  # upper bound at the confidence asked for
    fraction: float  # the grid fraction the prediction was made from
    extrapolated: float  # the run's own pace carried over the learning rate still to come


@dataclass
class CurveStopper:
    """Predicts a run's final metric, with a calibrated upper bound, from its curve prefix."""

    grid: tuple[float, ...]
    metric_name: str
    models: dict[int, _PrefixModel]  # prefix length (grid points reached) -> model
    provenance: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------- predicting
    def _previous(self, k: int) -> float:
        return self.grid[k - 2] if k > 1 else 0.0

    def predict(
        self, curve: Curve, shape: RunShape, confidence: float = DEFAULT_CONFIDENCE
    ) -> Prediction | None:
        prefix = curve.prefix(self.grid)
        if prefix is None:
            return None
        metric, loss = prefix
        k = len(metric) - 1
        model = self.models.get(k)
        if model is None:
            return None
        row = np.nan_to_num(
            np.array(features(metric, loss, self.grid[k - 1], shape, self._previous(k))), nan=0.0
        ).tolist()
        point = metric[-1] + model.trees.predict(row)
        pace = max(
            row[-2], row[-1]
        )  # the faster of the whole prefix's pace and the last interval's
        return Prediction(
            final=point,
            upper=point + model.width(row, confidence),
            fraction=self.grid[k - 1],
            extrapolated=metric[-1] + pace,
        )

    def should_stop(
        self,
        curve: Curve,
        shape: RunShape,
        best: float | None,
        *,
        confidence: float = DEFAULT_CONFIDENCE,
        margin: float = 0.0,
        guard: bool = True,
    ) -> str | None:
        """A reason to stop, or None: the final metric's upper bound lies below the study's best - margin.

        ``guard``: also require that the run's own pace, carried linearly over the learning rate
        still to come, stays below the best. The conformal bound is calibrated over all runs, and
        the runs it fails on are the rare late climbers, which are exactly the ones that end up
        best; a run still climbing fast enough to overtake the best is never stopped.
        """
        if best is None:
            return None
        prediction = self.predict(curve, shape, confidence)
        if prediction is None or prediction.upper >= best - margin:
            return None
        if guard and prediction.extrapolated >= best - margin:
            return None
        return (
            f"learning curve: final {self.metric_name} predicted {prediction.final:.3f}, at most "
            f"{prediction.upper:.3f} at {confidence:.0%} confidence (from {prediction.fraction:.0%} of the run), "
            f"below the study's best {best:.3f}"
        )

    # ------------------------------------------------------------- fitting
    @classmethod
    def fit(
        cls,
        runs: Sequence[TrainingCurve],
        *,
        grid: Sequence[float] = DEFAULT_GRID,
        metric_name: str = "accuracy",
        provenance: dict[str, Any] | None = None,
        n_estimators: int = 150,
        max_depth: int = 2,
        folds: int = 5,
        normalised: bool = True,
    ) -> CurveStopper:
        """One model per prefix length; residuals out of fold with the runs grouped by dataset.

        ``normalised``: a second model predicts each run's residual size from the same features (a
        flat curve moves little, a curve mid-rise a lot), and the conformal quantile is taken of
        residual / size, so a flat curve gets a narrow band and a climbing one a wide band. On the
        seed KB it saves more compute than one band width for all at the same share of best runs
        lost (bench/early_stop_bench.py --compare-plain)."""
        from sklearn.ensemble import GradientBoostingRegressor
        from sklearn.model_selection import GroupKFold, KFold

        usable = [r for r in runs if r.final is not None and r.curve.prefix(grid) is not None]
        groups = np.array([r.group for r in usable])
        n_groups = len(set(groups.tolist()))
        if len(usable) < 10:
            raise CurveModelError(
                f"{len(usable)} complete curves on the grid; at least 10 are needed to fit"
            )

        def model() -> Any:
            return GradientBoostingRegressor(
                n_estimators=n_estimators,
                max_depth=max_depth,
                learning_rate=0.05,
                subsample=1.0,
                min_samples_leaf=5,
                random_state=0,
            )

        def out_of_fold(x: np.ndarray, target: np.ndarray, g: np.ndarray) -> np.ndarray:
            """Each row predicted by a model fitted without its group (dataset)."""
            splits = min(folds, len(set(g.tolist())))
            found = np.empty(len(target))
            parts = (
                GroupKFold(n_splits=splits).split(x, target, g)
                if splits >= 2
                else KFold(5).split(x, target)
            )
            for train, test in parts:
                found[test] = model().fit(x[train], target[train]).predict(x[test])
            return found

        models: dict[int, _PrefixModel] = {}
        for k in range(1, len(grid) + 1):
            rows, targets, keep = [], [], []
            for i, run in enumerate(usable):
                prefix = run.curve.prefix(grid[:k])
                if prefix is None or len(prefix[0]) != k + 1 or run.final is None:
                    continue
                metric, loss = prefix
                rows.append(
                    features(metric, loss, grid[k - 1], run.shape, grid[k - 2] if k > 1 else 0.0)
                )
                targets.append(run.final - metric[-1])
                keep.append(i)
            if len(rows) < 10:
                continue
            x, y, g = np.nan_to_num(np.array(rows), nan=0.0), np.array(targets), groups[keep]
            residuals = y - out_of_fold(x, y, g)
            scale = None
            if normalised:  # residual sizes, predicted out of fold too
                size = np.abs(residuals)
                residuals = residuals / np.maximum(out_of_fold(x, size, g), SCALE_FLOOR)
                scale = _Trees.of(model().fit(x, size))
            models[k] = _PrefixModel(
                _Trees.of(model().fit(x, y)), sorted(residuals.tolist()), scale
            )
        info = {"runs": len(usable), "datasets": n_groups, **(provenance or {})}
        return cls(tuple(grid), metric_name, models, info)

    # ------------------------------------------------------------- file
    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "metatune-curve-stopper",
            "format": MODEL_FORMAT,
            "grid": list(self.grid),
            "metric_name": self.metric_name,
            "provenance": self.provenance,
            "models": {
                str(k): {
                    "init": m.trees.init,
                    "rate": m.trees.rate,
                    "trees": m.trees.trees,
                    "residuals": m.residuals,
                    "scale": None
                    if m.scale is None
                    else {
                        "init": m.scale.init,
                        "rate": m.scale.rate,
                        "trees": m.scale.trees,
                    },
                }
                for k, m in self.models.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CurveStopper:
        if data.get("kind") != "metatune-curve-stopper" or data.get("format") != MODEL_FORMAT:
            raise CurveModelError(
                f"not a curve-stop model of format {MODEL_FORMAT} (kind {data.get('kind')!r}, format {data.get('format')!r})"
            )

        def trees(m: dict[str, Any]) -> _Trees:
            return _Trees(float(m["init"]), float(m["rate"]), m["trees"])

        models = {
            int(k): _PrefixModel(
                trees(m),
                [float(r) for r in m["residuals"]],
                trees(m["scale"]) if m.get("scale") else None,
            )
            for k, m in data["models"].items()
        }
        return cls(
            tuple(float(f) for f in data["grid"]),
            str(data["metric_name"]),
            models,
            dict(data["provenance"]),
        )


def conformal_quantile(residuals: Sequence[float], confidence: float) -> float:
    """The split-conformal one-sided quantile: the ceil((n + 1) * confidence)-th smallest residual."""
    n = len(residuals)
    rank = math.ceil((n + 1) * confidence)
    return math.inf if rank > n else residuals[rank - 1]


@dataclass(frozen=True)
class TrainingCurve:
    """One knowledge-base run as the stopper learns from it."""

    curve: Curve
    shape: RunShape
    final: float | None
    group: str  # the dataset: residuals are measured on datasets the model did not see

    @classmethod
    def of_kb_run(cls, run: Any, metric: str = "accuracy") -> TrainingCurve | None:
        """From a :class:`metatune.knowledge.KbRun` (None when it has no usable curve for ``metric``)."""
        if run.metric_name != metric or not run.curve or "learning_rate" not in run.config:
            return None
        points = tuple(
            (p.fraction, float(p.metric), p.val_loss)
            for p in sorted(run.curve, key=lambda p: p.fraction)
            if p.metric is not None
        )
        complete = points and points[-1][0] >= 1.0 - 1e-9 and str(run.status) == "completed"
        return cls(
            Curve(points),
            RunShape.of(run.config),
            points[-1][1] if complete else None,
            run.dataset.name,
        )


# ----------------------------------------------------------------- the run hook
def stop_hook(
    stopper: CurveStopper,
    shape: RunShape,
    best: Callable[[], float | None],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    margin: float = 0.0,
) -> Callable[[int, int, list[tuple[int, Evaluation]]], str | None]:
    """A ``RunHooks.should_stop`` that asks ``best()`` for the study's best so far at each evaluation."""

    def should_stop(
        step: int, total_steps: int, evaluations: list[tuple[int, Evaluation]]
    ) -> str | None:
        current = best()
        if current is None:
            return None
        curve = Curve.from_evaluations(evaluations, total_steps, stopper.metric_name)
        if curve is None:
            return None
        return stopper.should_stop(curve, shape, current, confidence=confidence, margin=margin)

    return should_stop
