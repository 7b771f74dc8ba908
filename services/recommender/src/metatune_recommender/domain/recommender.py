"""What to train for a profiled dataset: the top-k, then one trial at a time by Expected Improvement.

The pure core of the service (no bus, no database): give it the knowledge base's runs and a
dataset's meta-features, get configurations with a predicted metric ± std and their cost.

* History = the knowledge base's LoRA tasks (one per dataset) of the study's base model, or of the
  nearest model family in the base when that model has none (a warning says which).
* Candidates = 512 scrambled-Sobol points of the shared LoRA space plus every configuration the
  base has measured, scored at the study's budget (its epochs or steps over its training rows, on
  the fleet's device: inputs of the model, so runs at other budgets inform the prediction) and
  handed out with that budget and a sequence length covering the p95.
* Predictions in metric units: before the study has two results, the prior's normal score is read
  through the history tasks' quantiles (p = Phi(mu): each task's p-quantile, weighted by how close
  its meta-features are to the dataset's; the ± includes how much those tasks' scales disagree);
  after, through the affine map the posterior learned (``a + b z``).
* A study's opening batch (no result, nothing pending) is scored by the prior's NumPy form
  (:class:`~.scoring.PriorScorer`, kept in the store beside the prior): the same top-k and
  predictions without importing torch; results and pending trials condition the torch prior.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from scipy.special import ndtr

from metatune.contracts import LoraConfig, MetaFeatures, TrainingBudget
from metatune.knowledge.records import KbRun
from metatune.knowledge.space import DIMENSIONS, Budget, decode

from .acquisition import Pick, Posterior, select_batch
from .cold_start import cold_start_trials
from .costs import Pricing, estimate
from .errors import EmptyHistory, RecommenderError, SurrogateFailure
from .fitted import PriorStore, prior_key, scorer_key
from .history import (
    LEVEL_FEATURES,
    RUN_BUDGET_KEYS,
    Task,
    feature_descriptors,
    run_budget,
    run_descriptors,
    tasks_from_runs,
)
from .intervals import Z80, HeldOut, conformal_factor, interval
from .levels import history_probes, probed_weights, shifted, task_probe
from .metric_scale import MetricScale, metric_scale
from .prior_settings import PriorSettings
from .scoring import PriorScorer
from .similarity import evidence, task_weights

if TYPE_CHECKING:  # torch and gpytorch: imported where a prior is fitted, loaded or conditioned
    from .prior import LearnedPrior

TOP_K = 3
EI_STOP_THRESHOLD = 0.01  # normal-score units: 1 % of a task's spread of results
SOBOL_CANDIDATES = 512
KNOWLEDGE_BASE = "knowledge-base"
COLD_START = "cold-start"
DEFAULT_SETTINGS = PriorSettings()


class TaskModel(Posterior, Protocol):
    """A task's posterior as the recommendation reads it: :class:`~.acquisition.Posterior` and
    the affine map ``a + b z`` from its normalised scale to the metric."""

    @property
    def a(self) -> float: ...

    @property
    def b(self) -> float: ...

    def with_observation(self, x_row: Any, z: float) -> TaskModel: ...


@dataclass(frozen=True)
class Reference:
    """The budget the history's candidates are scored at, with the rows and device it ran on."""

    budget: Budget
    train_rows: int | None = None
    device: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """As :func:`budget_key` gives it for a run trained at this budget."""
        steps = self.budget.max_steps
        epochs = None if steps else self.budget.epochs
        return (steps, epochs, self.budget.max_seq_length, self.train_rows, self.device)


def budget_key(run: KbRun) -> tuple[Any, ...]:
    """What a run was trained at: (max_steps, epochs without steps, max_seq_length, train rows,
    device); runs with one key are comparable."""
    measured_on = run_budget(run)
    steps = run.config.get("max_steps")
    return (
        steps,
        None if steps else run.config.get("epochs"),
        run.config.get("max_seq_length") or 128,
        measured_on.get("train_rows"),
        measured_on.get("device"),
    )


@dataclass(frozen=True)
class Recommendation:
    config: LoraConfig
    predicted: float | None
    std: float | None
    metric_name: str
    estimated_gpu_hours: float
    energy_wh: float
    power_kw: float
    acquisition: str  # top-k | expected-improvement | cold-start
    expected_improvement: float | None = None
    reason: str = ""  # why it is in the batch
    interval: tuple[float, float] | None = None  # 80 %, calibrated (:mod:`.intervals`)

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(mode="json"),
            "predicted": self.predicted,
            "std": self.std,
            "metric_name": self.metric_name,
            "estimated_gpu_hours": self.estimated_gpu_hours,
            "energy_wh": self.energy_wh,
            "power_kw": self.power_kw,
            "acquisition": self.acquisition,
            "expected_improvement": self.expected_improvement,
            "reason": self.reason,
            "interval": list(self.interval) if self.interval else None,
        }


@dataclass
class Advice:
    recommendations: list[Recommendation]
    source: str  # knowledge-base | cold-start
    base_model: str | None = None  # the base model whose history was used
    imputed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # why the knowledge base could not answer (the portfolio did)
    throughput_device: str | None = None
    best_ei: float | None = None  # continuation only: the best EI among candidates
    evidence: str | None = None  # "no close evidence: ..." where the base has nothing near

    def as_dict(self) -> dict[str, Any]:
        return {
            "recommendations": [r.as_dict() for r in self.recommendations],
            "source": self.source,
            "base_model": self.base_model,
            "imputed_features": self.imputed,
            "warnings": self.warnings,
            "error": self.error,
            "throughput_device": self.throughput_device,
            "best_ei": self.best_ei,
            "evidence": self.evidence,
        }


def _family(name: str) -> str:
    base = name.rstrip("/").split("/")[-1].lower()
    return re.sub(
        r"[-_.]?(\d+(\.\d+)?[mbk]|l\d+|v\d+|base|large|small|tiny|mini|uncased|cased)\b", "", base
    )


def nearest_base_model(wanted: str, known: Sequence[str]) -> str | None:
    """The known base model closest to ``wanted``: same name, else same family, else most similar name."""
    if not known:
        return None
    if wanted in known:
        return wanted
    family = _family(wanted)
    return max(
        known,
        key=lambda k: (
            _family(k) == family,
            difflib.SequenceMatcher(None, _family(k), family).ratio(),
        ),
    )


def is_lora(config: Mapping[str, Any]) -> bool:
    try:
        LoraConfig.model_validate(config)
    except ValueError:
        return False
    return "rank" in config and "learning_rate" in config


def measured_features(task: Task) -> Mapping[str, Any]:
    """All scalar meta-features a history task's dataset was profiled with (its descriptors
    leave the sample-dependent ones out; pricing a study's trials needs them all)."""
    for run in task.runs:
        if run.dataset.features is not None:
            return profile_descriptors(run.dataset.features)
    return task.descriptors


def impute(
    descriptors: Mapping[str, Any],
    history: Sequence[Task],
    describe: Callable[[Task], Mapping[str, Any]] = lambda task: task.descriptors,
) -> tuple[dict[str, float], list[str]]:
    """Fill descriptors the profile lacks (or has as NaN/None) with the median over the history
    tasks (each described by ``describe``: its descriptors, or :func:`measured_features`)."""
    filled = {
        k: float(v)
        for k, v in descriptors.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }
    imputed = []
    described = [describe(t) for t in history]
    keys = sorted({k for d in described for k, v in d.items() if isinstance(v, float)})
    for key in keys:
        if key not in filled:
            values = [value for d in described if isinstance(value := d.get(key), float)]
            filled[key] = float(np.median(values))
            imputed.append(key)
    return filled, imputed


def features_with(descriptors: Mapping[str, float], raw: Mapping[str, Any]) -> MetaFeatures:
    """A MetaFeatures for cost estimates from a (possibly partial) profile plus imputed values."""
    data = {k: v for k, v in raw.items() if v is not None}
    for key, value in descriptors.items():
        data.setdefault(key, value)
    fields = MetaFeatures.model_fields
    for name, info in fields.items():
        if name in data and info.annotation in (int, int | None) and isinstance(data[name], float):
            data[name] = round(data[name])
    return MetaFeatures.model_validate(data)


class Recommender:
    """Built from the knowledge base's runs; fits its prior lazily, once per base model."""

    def __init__(
        self,
        runs: Sequence[KbRun],
        *,
        settings: PriorSettings = DEFAULT_SETTINGS,
        candidates: int = SOBOL_CANDIDATES,
        ei_threshold: float = EI_STOP_THRESHOLD,
        store: PriorStore | None = None,
    ) -> None:
        self.runs = [r for r in runs if is_lora(r.config)]
        self.settings = settings
        self.n_candidates = candidates
        self.ei_threshold = ei_threshold
        self.store = store  # fitted priors kept between processes (None: fit in each)
        self._priors: dict[str, LearnedPrior] = {}
        self._scorers: dict[str, PriorScorer] = {}
        # per base model, made once: the runs never change after construction
        self._histories: dict[str, list[Task]] = {}
        self._interval_factors: dict[tuple[str, bool], float] = {}
        self._candidates: dict[tuple[str, tuple[Any, ...]], list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ history
    def base_models(self) -> list[str]:
        return sorted({r.base_model for r in self.runs})

    def history(self, base_model: str) -> list[Task]:
        if base_model not in self._histories:
            runs = [r for r in self.runs if r.base_model == base_model]
            self._histories[base_model] = tasks_from_runs(runs, min_runs=3)
        return self._histories[base_model]

    def prior(self, base_model: str) -> LearnedPrior:
        """The prior fitted on ``base_model``'s history: this object's, else the store's for the
        same history, candidates and settings, else fitted now (and kept in the store)."""
        if base_model not in self._priors:
            key = self.prior_key(base_model) if self.store else ""
            prior = self.store.load(key) if self.store else None
            if prior is None:
                from .prior import LearnedPrior

                prior = LearnedPrior.fit(
                    self.history(base_model),
                    self.settings,
                    extra_configs=self._scored_configs(base_model),
                )
                if self.store:
                    self.store.save(key, prior)
            self._priors[base_model] = prior
        return self._priors[base_model]

    def scorer(self, base_model: str) -> PriorScorer:
        """The pre-result path's NumPy form of ``base_model``'s prior with its candidates: this
        object's, else the store's (read without torch), else made from :meth:`prior` (and kept)."""
        if base_model not in self._scorers:
            key = self.scorer_key(base_model) if self.store else ""
            scorer = self.store.load_scorer(key) if self.store else None
            if scorer is None:
                scorer = self.prior(base_model).scorer(self._scored_configs(base_model))
                if self.store:
                    self.store.save_scorer(key, scorer)
            self._scorers[base_model] = scorer
        return self._scorers[base_model]

    def scorer_key(self, base_model: str) -> str:
        """What identifies ``base_model``'s scorer in a store (:func:`.fitted.scorer_key`)."""
        measured = [(budget_key(r), r.config) for r in self.runs if r.base_model == base_model]
        return scorer_key(self.history(base_model), self.settings, measured, self.n_candidates)

    def prior_key(self, base_model: str) -> str:
        """What identifies ``base_model``'s fitted prior in a store (:func:`.fitted.prior_key`)."""
        return prior_key(self.history(base_model), self.settings, self._scored_configs(base_model))

    def reference(self, base_model: str) -> Reference:
        """The budget candidates are scored at: the most common one among ``base_model``'s runs
        (with several seed files, the largest build's), so predictions speak of a budget the
        knowledge base measured most."""
        runs = [r for r in self.runs if r.base_model == base_model]
        counts = Counter(budget_key(r) for r in runs)
        if not counts:
            return Reference(Budget(max_steps=None, epochs=1.0, max_seq_length=128))
        (steps, epochs, length, rows, device), _ = counts.most_common(1)[0]
        budget = Budget(
            max_steps=int(steps) if steps else None,
            epochs=float(epochs) if epochs and not steps else 1.0,
            max_seq_length=int(length),
        )
        return Reference(budget, rows, device)

    def study_reference(
        self,
        base_model: str,
        budget: TrainingBudget,
        profile: Mapping[str, Any],
        fleet_device: str | None = None,
    ) -> Reference:
        """A study's budget as the model reads it: its epochs or steps over the rows it will train
        on, at the history's sequence length, on the fleet's device where the knowledge base has
        runs on it (else the history's most common device)."""
        default = self.reference(base_model)
        rows = profile.get("n_examples")
        train_rows = (
            budget.train_rows(int(rows)) if isinstance(rows, (int, float)) and rows > 0 else None
        )
        devices = {run_budget(r).get("device") for r in self.runs if r.base_model == base_model}
        return Reference(
            Budget(
                max_steps=budget.max_steps,
                epochs=budget.epochs if budget.max_steps is None else None,
                max_seq_length=default.budget.max_seq_length,
            ),
            train_rows or default.train_rows,
            fleet_device if fleet_device in devices else default.device,
        )

    def _scored_configs(
        self, base_model: str, reference: Reference | None = None
    ) -> list[dict[str, Any]]:
        """Candidates as ``reference`` (default: the history's most common budget) would train
        them, so they are comparable with the history."""
        default = self.reference(base_model)
        reference = reference or default
        key = (base_model, reference.key)
        if key not in self._candidates:
            if reference.key == default.key:
                self._candidates[key] = self._make_candidates(base_model, default)
            else:  # the same candidates, re-stamped with another budget
                at_default = self._scored_configs(base_model)
                self._candidates[key] = [self.at_reference(c, reference) for c in at_default]
        return self._candidates[key]

    def _make_candidates(self, base_model: str, reference: Reference) -> list[dict[str, Any]]:
        from scipy.stats import qmc  # seconds to import: only where candidates are made

        points = qmc.Sobol(d=len(DIMENSIONS), scramble=True, seed=0).random(self.n_candidates)
        configs = [
            self.at_reference(
                decode(point, budget=reference.budget).model_dump(mode="json"), reference
            )
            for point in points
        ]
        seen = {repr(sorted(c.items())) for c in configs}
        for run in self.runs:
            if run.base_model == base_model:
                config = self.at_reference(run.config, reference)
                if repr(sorted(config.items())) not in seen:
                    seen.add(repr(sorted(config.items())))
                    configs.append(config)
        return configs

    def interval_factor(self, base_model: str, probed: bool = True) -> float:
        """How many stds the 80 % interval spans before results, calibrated leaving each history
        task out in turn (:mod:`.intervals`), for a study with a label probe (``probed``) or
        without one (the level read through the probe, or not: :mod:`.levels`); the normal's 1.28
        where that cannot be measured (fewer than three tasks)."""
        key = (base_model, probed)
        if key in self._interval_factors:
            return self._interval_factors[key]
        scorer = self.scorer(base_model) if len(self.history(base_model)) >= 3 else None
        if scorer is not None and probed in scorer.interval_factors:
            self._interval_factors[key] = scorer.interval_factors[probed]
            return self._interval_factors[key]
        held = self.held_out_predictions(base_model, probes=probed) if scorer is not None else {}
        pairs = [(h.achieved - h.predicted, h.std) for rows in held.values() for h in rows]
        factor = conformal_factor([r for r, _ in pairs], [s for _, s in pairs])
        if scorer is not None and factor is not None:
            scorer.interval_factors[probed] = factor
            if self.store:
                self.store.save_scorer(self.scorer_key(base_model), scorer)
        self._interval_factors[key] = Z80 if factor is None else factor
        return self._interval_factors[key]

    def held_out_predictions(
        self, base_model: str, *, probes: bool = True
    ) -> dict[str, list[HeldOut]]:
        """Each history task's measured configurations predicted as a new dataset's would be, before
        any result (its descriptors and, with ``probes``, its label probe; the other tasks'
        scales; its own source weighted 0), by task name: what the interval is calibrated on. The
        fitted model itself saw every task (only its source is silenced)."""
        history = self.history(base_model)
        scorer = self.scorer(base_model)
        out: dict[str, list[HeldOut]] = {}
        for index, task in enumerate(history):
            others = history[:index] + history[index + 1 :]
            pool = scorer.inputs(scorer.scored, task.descriptors)
            posterior = scorer.condition(task.descriptors, [], [], pool)
            if posterior.weights is not None:  # its own source says nothing of it
                own = [s.name == task.name for s in scorer.sources] + [False]
                weights = np.where(own, 0.0, posterior.weights)
                posterior = dataclasses.replace(posterior, weights=weights / weights.sum())
            mu, sd = posterior.predict_inputs(scorer.inputs(task.configs, task.descriptors))
            weights_by_scale = task_weights(task.descriptors, others)
            probe = task_probe(task) if probes else None
            out[task.name] = [
                HeldOut(
                    float(actual),
                    *self._to_metric(m, d, posterior, others, weights_by_scale, probe),
                )
                for m, d, actual in zip(mu, sd, task.values, strict=True)
            ]
        return out

    # ------------------------------------------------------------------ answers
    def recommend(
        self,
        base_model: str,
        profile: Mapping[str, Any],
        k: int = TOP_K,
        observed: Sequence[tuple[Mapping[str, Any], float]] = (),
        pending: Sequence[Mapping[str, Any]] = (),
        *,
        fleet_device: str | None = None,
        budget: TrainingBudget | None = None,
    ) -> Advice:
        """Top-``k`` for a new study (``observed`` empty), or the next ``k`` given the study's results
        (config, metric); ``pending`` trials (requested, not finished) are fantasised at their predicted
        mean (Kriging believer) and never proposed again. Predicted and priced at the study's
        ``budget`` (default: :class:`TrainingBudget`'s) for ``fleet_device``, the device the agents
        train on (:mod:`.costs`). Never raises for want of knowledge: an empty base or a failed fit
        answers with the documented cold-start portfolio, flagged, with the reason."""
        budget = budget or TrainingBudget()
        warnings: list[str] = []
        used = nearest_base_model(base_model, self.base_models())
        if used is None:
            return self._cold_start(
                budget, profile, k, "the knowledge base holds no LoRA run", warnings, len(observed)
            )
        if used != base_model:
            warnings.append(
                f"no knowledge-base runs for base model {base_model!r}: using the nearest family, {used!r}"
            )
        history = self.history(used)
        try:
            reference = self.study_reference(used, budget, profile, fleet_device)
            prior, scored = self._model(used, reference, opening=not (observed or pending))
        except (EmptyHistory, SurrogateFailure) as exc:
            return self._cold_start(
                budget, profile, k, str(exc), warnings, len(observed), base_model=used
            )
        descriptors, features, imputed = self._task_features(profile, history)
        scale = metric_scale(history[0].metric_name if history else "metric")
        try:
            posterior, candidates, exclude = self._posterior(
                prior, scored, descriptors, observed, pending, reference, scale
            )
            picks = select_batch(posterior, candidates, k, exclude=exclude)
        except SurrogateFailure as exc:
            return self._cold_start(
                budget, profile, k, str(exc), warnings, len(observed), base_model=used
            )
        pricing = Pricing([r for r in self.runs if r.base_model == used], fleet_device)
        return Advice(
            self._recommendations(
                used, picks, scored, posterior, descriptors, features, pricing, budget, observed
            ),
            KNOWLEDGE_BASE,
            used,
            imputed,
            warnings,
            None,
            pricing.throughput().device,
            max((p.ei for p in picks), default=None) if observed else None,
            None if observed else evidence(descriptors, history).note(),
        )

    @staticmethod
    def _task_features(
        profile: Mapping[str, Any], history: Sequence[Task]
    ) -> tuple[dict[str, float], MetaFeatures, list[str]]:
        """The task's descriptors, its meta-features and which of them were imputed. The model
        compares datasets on what the history's tasks are described by (no sample-dependent
        meta-features); the whole profile, imputed where missing, still prices the trials."""
        descriptors, _ = impute(feature_descriptors(profile), history)
        measured, imputed = impute(profile, history, measured_features)
        for key in LEVEL_FEATURES:  # read as measured or not at all (:mod:`.levels`)
            measured.pop(key, None)
        imputed = [key for key in imputed if key not in LEVEL_FEATURES]
        try:
            return descriptors, features_with(measured, profile), imputed
        except ValueError as exc:
            raise RecommenderError(f"profile unusable: {exc}") from exc

    def _recommendations(
        self,
        base_model: str,
        picks: Sequence[Pick],
        scored: Sequence[Mapping[str, Any]],
        posterior: TaskModel,
        descriptors: Mapping[str, Any],
        features: MetaFeatures,
        pricing: Pricing,
        budget: TrainingBudget,
        observed: Sequence[Any],
    ) -> list[Recommendation]:
        """Each pick as a configuration at the study's ``budget``, predicted in metric units (with
        its 80 % interval), priced, and why it is there."""
        history = self.history(base_model)
        weights = task_weights(descriptors, history)
        factor = self.interval_factor(base_model, features.probe_accuracy is not None)
        return [
            self._recommendation(
                scored[p.index],
                p,
                posterior,
                history,
                weights,
                features,
                pricing,
                history[0].metric_name if history else "metric",
                "expected-improvement" if observed else "top-k",
                budget,
                factor,
            )
            for p in picks
        ]

    def _model(
        self, base_model: str, reference: Reference, *, opening: bool
    ) -> tuple[LearnedPrior | PriorScorer, list[dict[str, Any]]]:
        """What scores a study's candidates, and the candidates as its budget trains them: before
        its first result or pending trial (``opening``), the NumPy scorer (no torch), else the
        prior, which results and pending trials condition."""
        scored = self._scored_configs(base_model, reference)
        if opening:
            scorer = self.scorer(base_model).with_scored(scored)
            return scorer, scorer.scored
        return self.prior(base_model), scored

    def _posterior(
        self,
        prior: LearnedPrior | PriorScorer,
        scored: Sequence[Mapping[str, Any]],
        descriptors: Mapping[str, Any],
        observed: Sequence[tuple[Mapping[str, Any], float]],
        pending: Sequence[Mapping[str, Any]],
        reference: Reference,
        scale: MetricScale,
    ) -> tuple[TaskModel, Any, set[int]]:
        """The study's posterior given its ``observed`` results (on the model's ``scale``) and its
        ``pending`` trials fantasised at their predicted mean, the candidates' inputs (a NumPy array
        for the scorer, a torch tensor for the prior) and the candidates never to propose again."""
        if isinstance(prior, PriorScorer):
            columns = prior.inputs(scored, descriptors)
            return prior.condition(descriptors, [], [], columns), columns, set()
        candidates = prior.inputs(scored, descriptors)
        posterior: TaskModel = prior.condition(
            descriptors,
            [self.at_reference(c, reference) for c, _ in observed],
            [scale.to_model(v) for _, v in observed],
            candidates,
        )
        taken = [self.at_reference(o, reference) for o, _ in observed] + [
            self.at_reference(p, reference) for p in pending
        ]
        exclude = {i for i, c in enumerate(scored) for o in taken if self._same(c, o)}
        for config in pending:
            x_row = prior.inputs([self.at_reference(config, reference)], descriptors)
            mean, _ = posterior.predict_inputs(x_row)
            posterior = posterior.with_observation(x_row[0], float(mean[0]))
        return posterior, candidates, exclude

    def should_stop(self, advice: Advice, results: int) -> bool:
        """Stop by EI only once the first batch's results are in: before that, the task's scale (and so
        any improvement) is barely known (with one result, none at all)."""
        return (
            results >= TOP_K and advice.best_ei is not None and advice.best_ei < self.ei_threshold
        )

    @staticmethod
    def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        keys = (
            "rank",
            "alpha",
            "learning_rate",
            "batch_size",
            "dropout",
            "warmup_ratio",
            "lr_schedule",
            "target_modules",
        )
        return all(a.get(key) == b.get(key) for key in keys)

    @staticmethod
    def at_reference(config: Mapping[str, Any], reference: Reference) -> dict[str, Any]:
        """``config`` as the history would have trained it: the reference budget, rows and device."""
        c = dict(config)
        c.pop("seed", None)
        c.pop("max_train_rows", None)  # the reference's train_rows says it
        budget = reference.budget
        c.update(
            max_steps=budget.max_steps,
            epochs=None if budget.max_steps else budget.epochs,
            max_seq_length=budget.max_seq_length,
        )
        for key, value in (("train_rows", reference.train_rows), ("device", reference.device)):
            if value is None:
                c.pop(key, None)
            else:
                c[key] = value
        return c

    def _recommendation(
        self,
        scored: Mapping[str, Any],
        pick: Pick,
        posterior: TaskModel,
        history: Sequence[Task],
        weights: np.ndarray,
        features: MetaFeatures,
        pricing: Pricing,
        metric_name: str,
        acquisition: str,
        budget: TrainingBudget,
        interval_factor: float,
    ) -> Recommendation:
        max_len = max(32, min(512, int(features.tokens_p95) + 2))
        choice = {k: v for k, v in scored.items() if k not in RUN_BUDGET_KEYS}
        config = LoraConfig.model_validate(
            {**choice, **budget.lengths(), "max_seq_length": max_len}
        )
        predicted, std = self._to_metric(
            pick.mean, pick.std, posterior, history, weights, features.probe_accuracy
        )
        scale = metric_scale(metric_name)
        band = interval(predicted, std, interval_factor, scale.low, scale.high)
        throughput = pricing.throughput(config)
        hours, energy = estimate(config, features, throughput)
        return Recommendation(
            config,
            predicted,
            std,
            metric_name,
            float(f"{hours:.4g}"),  # 4 significant digits: a seconds-long job keeps its energy
            round(energy, 2),
            round(throughput.power_kw, 4),
            acquisition,
            pick.ei if acquisition == "expected-improvement" else None,
            pick.reason,
            band,
        )

    @staticmethod
    def _to_metric(
        mu: float,
        sd: float,
        posterior: TaskModel,
        history: Sequence[Task],
        weights: np.ndarray,
        probe: float | None = None,
    ) -> tuple[float, float]:
        """Normal score -> metric units. Before two results the task's scale is unknown: each history
        task reads the score on its own scale, weighted by similarity and moved to the study's label
        ``probe`` where there is one (:mod:`.levels`), and the ± holds both the model's uncertainty
        and how much the similar tasks' scales disagree. From two results on, the
        task's own map reads it on the metric's model scale (:mod:`.metric_scale`), so a prediction
        stays inside the metric's range."""
        if posterior.observed >= 2:
            model_scale = metric_scale(history[0].metric_name if history else "metric")
            return model_scale.interval(posterior.a + posterior.b * mu, posterior.b * sd)

        scale = metric_scale(history[0].metric_name if history else "metric")
        probes = history_probes(history, probe, scale)
        if probes is not None:
            weights = probed_weights(weights, probes)

        def values(z: float) -> np.ndarray:
            p = float(ndtr(z))
            at = np.array([np.quantile(t.values, p) for t in history])
            if probes is None or probe is None:
                return at
            return np.asarray(
                np.nan_to_num(shifted(at, probes, probe)), dtype=float
            )  # weight 0 at NaN

        at_mean = values(mu)
        predicted = float(weights @ at_mean)
        between_tasks = float(weights @ (at_mean - predicted) ** 2)
        within = float(weights @ ((values(mu + sd) - values(mu - sd)) / 2))
        return predicted, math.sqrt(max(0.0, between_tasks) + max(0.0, within) ** 2)

    def _cold_start(
        self,
        budget: TrainingBudget,
        profile: Mapping[str, Any],
        k: int,
        reason: str,
        warnings: list[str],
        done: int,
        base_model: str | None = None,
    ) -> Advice:
        features = features_with({}, profile)
        trials = cold_start_trials(features, done + k, budget)[done:]
        recs = [
            Recommendation(
                t.config,
                None,
                None,
                "metric",
                t.estimated_gpu_hours,
                round(t.estimated_gpu_hours * t.power_kw * 1000, 2),
                t.power_kw,
                "cold-start",
                reason=f"entry {done + i + 1} of the cold-start portfolio ({reason})",
            )
            for i, t in enumerate(trials)
        ]
        return Advice(recs, COLD_START, base_model, [], warnings, reason, "assumed")


def profile_descriptors(features: MetaFeatures | Mapping[str, Any]) -> dict[str, Any]:
    """A profile as a flat dict of its scalar meta-features (missing ones absent)."""
    data = features.model_dump() if isinstance(features, MetaFeatures) else dict(features)
    return {k: v for k, v in data.items() if not isinstance(v, (dict, list))}


__all__ = [
    "EI_STOP_THRESHOLD",
    "Advice",
    "Recommendation",
    "Recommender",
    "nearest_base_model",
    "profile_descriptors",
    "run_descriptors",
]
