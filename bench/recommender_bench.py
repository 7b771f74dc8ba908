"""Recommender benchmark, the Brain's key figure: evaluations to a top configuration on unseen tasks.

Each task is a finite table of (configuration, objective) rows; an "evaluation" looks up one row,
never the same twice. For every test task the recommender learns only from the *other* tasks
(``--train DIR`` with no ``--test``: leave one task out; with ``--test DIR``: train on all of
``--train``; ``--kb FILE``: leave one dataset out of a knowledge-base file). Methods, same tasks,
same run:

  random     random search without replacement, exact expectations (no simulation)
  tpe        Optuna TPE (defaults, 10 start-up trials), each suggestion snapped to the nearest
             unevaluated row
  gp_ei      GP-EI without history: scikit-learn GP (Matern-5/2 + noise) on the task's own
             standardised values, 3 random initial rows, then EI over the remaining rows
  portfolio  the top-k-from-history portfolio alone: rows ordered by the mean normalised score of
             their nearest configuration on each history task
  metatune   the recommender: a GP prior learned on the history tasks (HyperBO-style); with
             history tasks that measured the task's configurations (sources), its top-3 is their
             portfolio ordered by the prior and its mean their posteriors, weighted by how they
             order the task's results; without, the top-3 by the learned mean and Kriging-believer
             EI; then EI conditioned on the task's own results. With ``--kb`` the prior's pool (what
             decides the sources) holds every configuration of the knowledge base besides the
             task's rows, as the service's candidates do; evaluations stay on the task's rows

Figures: normalised regret (best - best found) / (best - worst) after 1, 3, 10, 50 evaluations;
evaluations to reach a top-1 % / top-5 % row of the table (rank-based: at least one row, ties
included); the savings factor against random = E[random evals] / mean evals of the method, its
geometric mean over tasks; the share of tasks whose first three evaluations hold a row within 2 %
of the task's best. The seeded methods also report each seed's nr@3 and top-3 share and their
spread (max - min); ``metatune_vs_portfolio`` sets the recommender's margins over the portfolio
against that spread. Per task, ``best_row_rank`` says where the task's best row stands in the
portfolio's order and, per seed, by the recommender's signals before any result (the prior's mean,
the learned mean alone, the history task that ranks it highest): a row no signal ranks high is one
no top-3 learned from the history holds. A method that has not reached a target after
``--max-evals`` evaluations is charged the random-search expectation for the rest of the table
(stated, never hidden).

    python bench/recommender_bench.py --train ../shared/data/hpo --seeds 10
    python bench/recommender_bench.py --train ../shared/data/hpo --test HIDDEN_DIR --json
    python bench/recommender_bench.py --kb services/recommender/src/metatune_recommender/data/seed_kb.jsonl
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import finite, print_json, progress, stdout_to_stderr

from metatune.knowledge.errors import KnowledgeBaseError
from metatune.knowledge.files import read_kb_file
from metatune_recommender.domain.acquisition import expected_improvement, select_batch
from metatune_recommender.domain.encoding import Encoder
from metatune_recommender.domain.history import Task, tasks_from_runs
from metatune_recommender.domain.normalise import copula_scores
from metatune_recommender.domain.prior import LearnedPrior, PriorSettings

REGRET_AT = (1, 3, 10, 50)
METHODS = ("random", "tpe", "gp_ei", "portfolio", "metatune")
LOWER_IS_BETTER = ("ppl", "perplexity", "loss", "error", "time")
DESCRIPTOR_SKIP = {"split", "task", "file", "search_space", "n_configs", "objective", "cost_column"}


# ====================================================================== reading task folders
def _number(text: str | None) -> float | str | None:
    if text is None or text.strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        return text.strip()


def _lines(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# Per-format readers (the formats of the hpo README), chosen by the file's name, never by task name.
# Each returns (config, objective) rows; outcome columns (time, memory, perplexity...) never enter a config.
NMTHPO_CONFIG = (
    "bpe_symbols",
    "num_layers",
    "num_embed",
    "transformer_feed_forward_num_hidden",
    "transformer_attention_heads",
    "initial_learning_rate",
)


def _read_nmthpo(path: Path, task: str, objective: str) -> list[tuple[dict, float]]:
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row.get("task") not in (None, task):
                continue
            value = _number(row.get(objective))
            if isinstance(value, float):
                rows.append(({k: _number(row[k]) for k in NMTHPO_CONFIG if k in row}, value))
    return rows


def _read_nmtlc(path: Path, task: str, objective: str) -> list[tuple[dict, float]]:
    rows = []
    for line in _lines(path):
        if line.get("task") not in (None, task):
            continue
        key = (
            objective
            if objective in line
            else ("bleu_optimal" if "bleu_optimal" in line else "perplexity_optimal")
        )
        value = line.get(key)
        if value is None:
            continue
        config = dict(line.get("hyperparams") or {})
        if line.get("llm"):
            config["llm"] = line["llm"]
        rows.append((config, float(value)))
    return rows


def _read_opda(path: Path, task: str, objective: str) -> list[tuple[dict, float]]:
    rows = []
    for line in _lines(path):
        curves = line.get("learning_curves") or {}
        matched = curves.get("matched") or next(iter(curves.values()), [])
        if not matched:
            continue
        config = {
            k: line[k]
            for k in (
                "num_train_epochs",
                "train_batch_size",
                "learning_rate",
                "warmup_steps",
                "cls_drop_out",
            )
            if k in line
        }
        rows.append((config, float(matched[-1][1])))
    return rows


def _read_peft(path: Path, task: str, objective: str) -> list[tuple[dict, float]]:
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            value = _number(row.get(objective if objective in row else "test_accuracy"))
            if row.get("status", "success") != "success" or not isinstance(value, float):
                continue
            config = {
                k: _number(row[k])
                for k in (
                    "peft_type",
                    "r",
                    "lora_alpha",
                    "lora_dropout",
                    "use_dora",
                    "use_rslora",
                    "lr",
                    "weight_decay",
                    "batch_size",
                )
                if k in row
            }
            rows.append((config, value))
    return rows


def reader_for(path: Path) -> Callable[[Path, str, str], list[tuple[dict, float]]]:
    name = path.name
    if name.startswith("nmthpo_") or (name.endswith(".csv") and "runs" not in name):
        return _read_nmthpo
    if name.startswith("nmtlc_"):
        return _read_nmtlc
    if "tuning.results" in name:
        return _read_opda
    if name.endswith("_runs.csv"):
        return _read_peft
    raise ValueError(f"{path}: no reader for this table format")


def _dedupe(rows: list[tuple[dict, float]]) -> tuple[list[dict], np.ndarray]:
    """Repeats of one configuration (re-runs) become one row with their mean objective."""
    groups: dict[str, list[float]] = {}
    configs: dict[str, dict] = {}
    for config, value in rows:
        key = json.dumps(config, sort_keys=True, default=str)
        groups.setdefault(key, []).append(value)
        configs[key] = config
    return [configs[k] for k in groups], np.array([float(np.mean(v)) for v in groups.values()])


def read_task_folder(directory: Path) -> list[Task]:
    """Every task of ``tasks.csv`` whose table can be read (skipped ones are reported on stderr)."""
    tasks = []
    with (directory / "tasks.csv").open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            path = directory / row["file"]
            objective = row.get("objective", "")
            try:
                rows = reader_for(path)(
                    path, row["task"], objective.split()[0] if objective else ""
                )
            except (OSError, ValueError, KeyError) as exc:
                print(f"skipped task {row['task']}: {exc}", file=sys.stderr)
                continue
            configs, values = _dedupe(rows)
            if any(word in objective.lower() for word in LOWER_IS_BETTER):
                values = -values
            if len(values) < 5:
                print(f"skipped task {row['task']}: {len(values)} rows", file=sys.stderr)
                continue
            descriptors = {
                k: v
                for k, v in ((k, _number(v)) for k, v in row.items() if k not in DESCRIPTOR_SKIP)
                if v is not None
            }
            tasks.append(
                Task(
                    name=row["task"],
                    descriptors=descriptors,
                    configs=configs,
                    values=values,
                    metric_name=objective or "objective",
                    base_model=str(row.get("base_model", "")),
                )
            )
    return tasks


def read_kb_tasks(path: Path) -> list[Task]:
    runs = read_kb_file(path).runs
    return tasks_from_runs(runs, min_runs=5)


# ====================================================================== the protocol
@dataclass(frozen=True)
class Targets:
    best: float
    worst: float
    top1: np.ndarray  # boolean masks over rows
    top5: np.ndarray
    within2: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> Targets:
        order = np.sort(values)[::-1]
        n = len(values)

        def top(q: float) -> np.ndarray:
            return values >= order[max(1, math.ceil(q * n)) - 1]

        best = float(order[0])
        threshold = best - 0.02 * abs(best)
        return cls(best, float(order[-1]), top(0.01), top(0.05), values >= threshold)


@dataclass
class Outcome:
    """One method's figures on one task (means over seeds)."""

    evals_top1: float
    evals_top5: float
    regret: dict[int, float]
    top3_within2: float
    reached_top1: float = 1.0  # share of seeds that reached the top-1 % within the evaluation cap


def expected_random_evals(n: int, hits: int) -> float:
    """E[draws without replacement until the first of ``hits`` targets among ``n`` rows] = (n + 1) / (hits + 1)."""
    return (n + 1) / (hits + 1)


def random_outcome(values: np.ndarray, targets: Targets) -> Outcome:
    n = len(values)
    ascending = np.sort(values)
    span = targets.best - targets.worst
    regret = {}
    for k in REGRET_AT:
        kk = min(k, n)
        # P(max of kk draws = j-th smallest) = C(j-1, kk-1) / C(n, kk), j = kk..n
        j = np.arange(kk, n + 1)
        logp = (_lgamma(j) - _lgamma(kk) - _lgamma(j - kk + 1)) - (
            _lgamma(n + 1) - _lgamma(kk + 1) - _lgamma(n - kk + 1)
        )
        expected_max = float(np.sum(np.exp(logp) * ascending[j - 1]))
        regret[k] = (targets.best - expected_max) / span if span > 0 else 0.0
    m2 = int(targets.within2.sum())
    miss3 = (
        math.exp(_lgamma(n - m2 + 1) - _lgamma(n - m2 - 2) - _lgamma(n + 1) + _lgamma(n - 2))
        if n - m2 >= 3
        else 0.0
    )
    return Outcome(
        evals_top1=expected_random_evals(n, int(targets.top1.sum())),
        evals_top5=expected_random_evals(n, int(targets.top5.sum())),
        regret=regret,
        top3_within2=1.0 - miss3,
    )


def _lgamma(x: Any) -> Any:
    from scipy.special import gammaln

    return gammaln(x)


def score_sequence(order: Sequence[int], values: np.ndarray, targets: Targets, cap: int) -> Outcome:
    """Figures of one evaluation order (the rows a method looked up, in order)."""
    n = len(values)
    seen = values[list(order)]
    running = np.maximum.accumulate(seen)
    span = targets.best - targets.worst

    def evals_to(mask: np.ndarray) -> tuple[float, bool]:
        hits = np.nonzero(mask[list(order)])[0]
        if len(hits):
            return float(hits[0] + 1), True
        remaining = n - len(order)
        left = int(mask.sum())  # none found yet: all targets are among the remaining rows
        return len(order) + expected_random_evals(remaining, left), False

    e1, reached = evals_to(targets.top1)
    e5, _ = evals_to(targets.top5)
    regret = {
        k: float((targets.best - running[min(k, len(running)) - 1]) / span) if span > 0 else 0.0
        for k in REGRET_AT
    }
    return Outcome(e1, e5, regret, float(targets.within2[list(order[:3])].any()), float(reached))


def mean_outcome(outcomes: list[Outcome]) -> Outcome:
    return Outcome(
        evals_top1=float(np.mean([o.evals_top1 for o in outcomes])),
        evals_top5=float(np.mean([o.evals_top5 for o in outcomes])),
        regret={k: float(np.mean([o.regret[k] for o in outcomes])) for k in REGRET_AT},
        top3_within2=float(np.mean([o.top3_within2 for o in outcomes])),
        reached_top1=float(np.mean([o.reached_top1 for o in outcomes])),
    )


# ====================================================================== methods
def run_tpe(task: Task, x: np.ndarray, cap: int, seed: int) -> list[int]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    columns = _tpe_space(task.configs)
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    taken: list[int] = []
    free = np.ones(len(task.values), dtype=bool)
    raw = _raw_matrix(task.configs, columns)
    scale = raw.std(0) + 1e-12
    for _ in range(min(cap, len(task.values))):
        trial = study.ask()
        point = []
        for name, kind, spec in columns:
            if kind == "cat":
                point.append(float(spec.index(trial.suggest_categorical(name, spec))))
            else:
                low, high, log = spec
                v = trial.suggest_float(name, low, high, log=log)
                point.append(math.log(v) if log else v)
        distance = (((raw - np.array(point)) / scale) ** 2).sum(1)
        distance[~free] = np.inf
        index = int(np.argmin(distance))
        free[index] = False
        taken.append(index)
        study.tell(trial, float(task.values[index]))
    return taken


def _tpe_space(configs: list[dict]) -> list[tuple[str, str, Any]]:
    columns = []
    for key in sorted({k for c in configs for k in c}):
        values = [c.get(key) for c in configs]
        uniq = sorted({json.dumps(v, sort_keys=True, default=str) for v in values})
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if len(uniq) <= 1:
            continue
        if numeric and len(uniq) > 10:
            low, high = float(min(values)), float(max(values))
            log = low > 0 and high / low >= 4
            columns.append((key, "num", (low, high, log)))
        else:
            columns.append((key, "cat", uniq))
    return columns


def _raw_matrix(configs: list[dict], columns: list[tuple[str, str, Any]]) -> np.ndarray:
    out = np.zeros((len(configs), len(columns)))
    for i, config in enumerate(configs):
        for j, (name, kind, spec) in enumerate(columns):
            value = config.get(name)
            if kind == "cat":
                out[i, j] = spec.index(json.dumps(value, sort_keys=True, default=str))
            else:
                out[i, j] = math.log(value) if spec[2] else value
    return out


def run_gp_ei(task: Task, x: np.ndarray, cap: int, seed: int) -> list[int]:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    rng = np.random.default_rng(seed)
    n = len(task.values)
    taken = list(rng.choice(n, size=min(3, n), replace=False))
    kernel = ConstantKernel(1.0) * Matern(length_scale=np.ones(x.shape[1]), nu=2.5) + WhiteKernel(
        1e-2
    )
    while len(taken) < min(cap, n):
        y = task.values[taken]
        y = (y - y.mean()) / (y.std() + 1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gp = GaussianProcessRegressor(kernel=kernel, normalize_y=False, random_state=seed).fit(
                x[taken], y
            )
        free = np.setdiff1d(np.arange(n), taken)
        mu, sd = gp.predict(x[free], return_std=True)
        taken.append(int(free[np.argmax(expected_improvement(mu, sd, float(y.max())))]))
    return taken


def portfolio_order(task: Task, history: list[Task]) -> list[int]:
    """Rows by the mean (over history tasks) normalised score of their nearest history configuration."""
    encoder = Encoder.fit([c for t in history for c in t.configs] + task.configs)
    x = encoder.transform(task.configs)
    score = np.zeros(len(task.configs))
    for past in history:
        px = encoder.transform(past.configs)
        z = copula_scores(past.values)
        nearest = ((x[:, None, :] - px[None, :, :]) ** 2).sum(-1).argmin(1)
        score += z[nearest]
    return list(np.argsort(-score, kind="stable"))


@dataclass(frozen=True)
class Opening:
    """A task before any result: its rows as the prior's inputs (the candidates), the prior's pool
    (the rows plus, with a knowledge base, every configuration it holds, as the service's candidates
    do; the pool decides the transfer sources) and the posterior."""

    candidates: Any
    pool: Any
    posterior: Any

    @classmethod
    def of(
        cls, task: Task, prior: LearnedPrior, measured: Sequence[dict[str, Any]] = ()
    ) -> Opening:
        candidates = prior.inputs(task.configs, task.descriptors)
        pool = (
            prior.inputs([*task.configs, *measured], task.descriptors) if measured else candidates
        )
        return cls(candidates, pool, prior.condition(task.descriptors, [], [], pool=pool))


def run_metatune(
    task: Task, prior: LearnedPrior, opening: Opening, cap: int, batch: int = 3
) -> list[int]:
    """Top-``batch`` from the learned prior, then one EI pick at a time conditioned on the results."""
    candidates = opening.candidates
    taken = [p.index for p in select_batch(opening.posterior, candidates, batch)]
    while len(taken) < min(cap, len(task.values)):
        posterior = prior.condition(
            task.descriptors, [task.configs[i] for i in taken], task.values[taken], opening.pool
        )
        taken.append(select_batch(posterior, candidates, 1, exclude=set(taken))[0].index)
    return taken


def best_row_rank(values: np.ndarray, score: np.ndarray) -> int:
    """Where the task's best row (the best-placed of tied ones) stands when rows are ordered by
    ``score``, 1 = first; rows scored level with it count in its favour."""
    best = np.flatnonzero(values == values.max())
    return int(min((score > score[i]).sum() for i in best)) + 1


def opening_ranks(task: Task, prior: LearnedPrior, opening: Opening) -> dict[str, int]:
    """Where the task's best row stands, before any result, by each signal the recommender has:
    the prior's mean for the task, the learned mean alone, and the history task that ranks it
    highest (each history task's posterior read at the rows)."""
    mean, _ = opening.posterior.predict_inputs(opening.candidates)
    sources, _ = prior.source_predictions(opening.candidates)
    return {
        "prior_mean": best_row_rank(task.values, mean),
        "learned_mean": best_row_rank(task.values, sources[-1]),
        "best_single_history_task": min(
            (best_row_rank(task.values, row) for row in sources[:-1]), default=len(task.values)
        ),
    }


# ====================================================================== the run
@dataclass
class TaskReport:
    name: str
    rows: int
    best: float
    history: list[str]
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # means over seeds
    per_seed: dict[str, list[Outcome]] = field(default_factory=dict)  # one for a seedless method
    # where the best row stands in the portfolio's order and, per seed, by the prior's signals
    best_row_rank: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def evaluate(
    test: list[Task],
    history_of: Callable[[Task], list[Task]],
    seeds: int,
    cap: int,
    methods: Sequence[str],
    settings: PriorSettings,
    log: Callable[[str], None],
    service_pool: bool = False,
) -> list[TaskReport]:
    """Every method on every test task; ``service_pool``: the recommender's pool holds the
    history's configurations too (a knowledge base, as the service scores it)."""
    reports = []
    for task in progress(test, "tasks"):
        history = history_of(task)
        targets = Targets.of(task.values)
        report = TaskReport(task.name, len(task.values), targets.best, [t.name for t in history])
        encoder = Encoder.fit(task.configs)
        x = encoder.transform(task.configs)
        for method in methods:
            start = time.perf_counter()
            if method == "random":
                report.per_seed[method] = [random_outcome(task.values, targets)]
            elif method == "portfolio":
                if not history:
                    continue
                order = portfolio_order(task, history)
                report.per_seed[method] = [score_sequence(order, task.values, targets, len(order))]
                place = np.empty(len(order))
                place[order] = -np.arange(len(order))  # a score that orders the rows as `order`
                report.best_row_rank["portfolio"] = [best_row_rank(task.values, place)]
            else:
                runs = []
                measured = [c for t in history for c in t.configs] if service_pool else []
                for seed in range(seeds):
                    if method == "tpe":
                        order = run_tpe(task, x, cap, seed)
                    elif method == "gp_ei":
                        order = run_gp_ei(task, x, cap, seed)
                    else:
                        if not history:
                            break
                        prior = LearnedPrior.fit(
                            history,
                            PriorSettings(**{**settings.__dict__, "seed": seed}),
                            extra_configs=task.configs,
                        )
                        opening = Opening.of(task, prior, measured)
                        order = run_metatune(task, prior, opening, cap)
                        for signal, rank in opening_ranks(task, prior, opening).items():
                            report.best_row_rank.setdefault(signal, []).append(rank)
                    runs.append(score_sequence(order, task.values, targets, cap))
                if runs:
                    report.per_seed[method] = runs
            if method in report.per_seed:
                report.outcomes[method] = mean_outcome(report.per_seed[method])
            report.seconds[method] = time.perf_counter() - start
            if method in report.outcomes:
                o = report.outcomes[method]
                log(
                    f"{task.name:<24} {method:<10} top1 {o.evals_top1:7.1f}  top5 {o.evals_top5:6.1f}  "
                    f"nr@3 {o.regret[3]:.3f}  top3<=2% {o.top3_within2:.2f}  ({report.seconds[method]:.0f} s)"
                )
        reports.append(report)
    return reports


def geometric_mean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return float(math.exp(np.mean(np.log(values)))) if values else None


def summary(reports: list[TaskReport], methods: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for method in methods:
        rows = [r for r in reports if method in r.outcomes]
        if not rows:
            continue
        s1 = [r.outcomes["random"].evals_top1 / r.outcomes[method].evals_top1 for r in rows]
        s5 = [r.outcomes["random"].evals_top5 / r.outcomes[method].evals_top5 for r in rows]
        out[method] = {
            "speedup_top1_vs_random": finite(geometric_mean(s1)),
            "speedup_top5_vs_random": finite(geometric_mean(s5)),
            "regret": {
                str(k): float(np.mean([r.outcomes[method].regret[k] for r in rows]))
                for k in REGRET_AT
            },
            "top3_within_2pct_share": float(
                np.mean([r.outcomes[method].top3_within2 for r in rows])
            ),
            "evals_top1_mean": float(np.mean([r.outcomes[method].evals_top1 for r in rows])),
            "tasks": len(rows),
            **seed_figures(rows, method),
        }
    return out


def seed_figures(rows: list[TaskReport], method: str) -> dict[str, dict[str, Any]]:
    """nr@3 and the top-3 share of each seed on its own (a seedless method: one entry), and their
    spread (max - min): how far the mean would move with other seeds."""
    seeds = max(len(r.per_seed[method]) for r in rows)
    picked = [
        [r.per_seed[method][min(s, len(r.per_seed[method]) - 1)] for r in rows]
        for s in range(seeds)
    ]
    per_seed = {
        "regret_3": [float(np.mean([o.regret[3] for o in run])) for run in picked],
        "top3_within_2pct_share": [float(np.mean([o.top3_within2 for o in run])) for run in picked],
    }
    spread = {name: float(max(values) - min(values)) for name, values in per_seed.items()}
    return {"per_seed": per_seed, "seed_spread": spread}


def versus_portfolio(totals: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The recommender against the history portfolio: its margins on nr@3 and on the top-3 share
    (positive: the recommender is better), the spread of its own seeds on each, and whether each
    margin is larger than that spread."""
    if "metatune" not in totals or "portfolio" not in totals:
        return None
    ours, theirs = totals["metatune"], totals["portfolio"]
    margin = {
        "regret_3": theirs["regret"]["3"] - ours["regret"]["3"],
        "top3_within_2pct_share": ours["top3_within_2pct_share"] - theirs["top3_within_2pct_share"],
    }
    spread = ours["seed_spread"]
    return {
        "margin": margin,
        "seed_spread": spread,
        "beyond_spread": {name: bool(margin[name] > spread[name]) for name in margin},
    }


def task_json(report: TaskReport) -> dict[str, Any]:
    return {
        "task": report.name,
        "rows": report.rows,
        "best": report.best,
        "history": report.history,
        "methods": {
            m: {
                "evals_top1": o.evals_top1,
                "evals_top5": o.evals_top5,
                "speedup_top1_vs_random": report.outcomes["random"].evals_top1 / o.evals_top1,
                "regret": {str(k): v for k, v in o.regret.items()},
                "top3_within_2pct": o.top3_within2,
                "reached_top1_share": o.reached_top1,
                "seconds": round(report.seconds.get(m, 0.0), 2),
            }
            for m, o in report.outcomes.items()
        },
        "best_row_rank": report.best_row_rank,
    }


def print_tables(
    reports: list[TaskReport],
    totals: dict[str, dict[str, Any]],
    methods: Sequence[str],
    console: Console,
    title: str,
) -> None:
    table = Table(title=f"Recommender bench: {title}")
    for column in (
        "method",
        "savings top-1% (geo)",
        "savings top-5% (geo)",
        "nr@1",
        "nr@3",
        "nr@10",
        "nr@50",
        "top-3 within 2%",
    ):
        table.add_column(column, justify="left" if column == "method" else "right")
    for method, row in totals.items():
        table.add_row(
            method,
            f"{row['speedup_top1_vs_random']:.1f}x",
            f"{row['speedup_top5_vs_random']:.1f}x",
            *(f"{row['regret'][str(k)]:.3f}" for k in REGRET_AT),
            f"{row['top3_within_2pct_share']:.0%}",
        )
    console.print(table)
    per_task = Table(title="evaluations to a top-1 % row (savings vs random)")
    per_task.add_column("task")
    per_task.add_column("rows", justify="right")
    for method in methods:
        per_task.add_column(method, justify="right")
    for report in reports:
        cells = []
        for method in methods:
            o = report.outcomes.get(method)
            if o is None:
                cells.append("-")
                continue
            ratio = report.outcomes["random"].evals_top1 / o.evals_top1
            cells.append(f"{o.evals_top1:.1f} ({ratio:.1f}x)")
        per_task.add_row(report.name, str(report.rows), *cells)
    console.print(per_task)
    comparison = versus_portfolio(totals)
    if comparison is not None:
        for name, label in (("regret_3", "nr@3"), ("top3_within_2pct_share", "top-3 within 2%")):
            console.print(
                f"metatune vs portfolio, {label}: margin {comparison['margin'][name]:+.4f}, "
                f"spread of metatune's seeds {comparison['seed_spread'][name]:.4f}, "
                f"beyond the spread: {'yes' if comparison['beyond_spread'][name] else 'no'}"
            )


def _overrides(items: list[str], parser: argparse.ArgumentParser) -> dict[str, Any]:
    """``NAME=VALUE`` pairs as PriorSettings fields, each value parsed as its default's type."""
    defaults = PriorSettings().__dict__
    out: dict[str, Any] = {}
    for item in items:
        name, _, text = item.partition("=")
        if name not in defaults or not text:
            parser.error(
                f"--prior-setting {item!r}: expected NAME=VALUE with NAME in {sorted(defaults)}"
            )
        kind = type(defaults[name])
        out[name] = text.lower() in ("1", "true", "yes") if kind is bool else kind(text)
    return out


# long: the bench's protocol in order, one block per step of its docstring
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--train",
        type=Path,
        help="history: a folder laid out like the hpo data (tasks.csv + tables)",
    )
    parser.add_argument(
        "--test",
        type=Path,
        help="tasks to tune (same layout); default: leave one task out of --train",
    )
    parser.add_argument("--kb", type=Path, help="a knowledge-base file: leave one dataset out")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--max-evals", type=int, default=100, help="evaluation cap per method and task"
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--tasks", nargs="+", help="only these test tasks (by name)")
    parser.add_argument("--prior-iterations", type=int, default=PriorSettings.iterations)
    parser.add_argument(
        "--transfer",
        action=argparse.BooleanOptionalAction,
        default=PriorSettings.transfer,
        help="the recommender with (or without) its transfer sources (PriorSettings.transfer)",
    )
    parser.add_argument(
        "--prior-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one PriorSettings field (e.g. opening=cover), for measuring the options",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if (args.train is None) == (args.kb is None):
        parser.error("give --train DIR (optionally --test DIR) or --kb FILE")
    for folder in (args.train, args.test):
        if folder is not None and not (folder / "tasks.csv").is_file():
            parser.error(f"{folder}: no tasks.csv (a folder laid out like the hpo data)")
    methods = ["random", *[m for m in args.methods if m != "random"]]
    console = Console(stderr=args.json)
    with stdout_to_stderr(args.json):
        if args.kb is not None:
            try:
                train = read_kb_tasks(args.kb)
            except KnowledgeBaseError as exc:
                parser.error(str(exc))
            test, title = train, f"{args.kb.name}, leave one dataset out"
        else:
            train = read_task_folder(args.train)
            test = read_task_folder(args.test) if args.test else train
            title = (
                f"{args.train} -> {args.test}"
                if args.test
                else f"{args.train.name}, leave one task out"
            )
        if args.tasks:
            test = [t for t in test if t.name in args.tasks]
        if not test:
            parser.error("no test task could be read")

        def history_of(task: Task) -> list[Task]:
            return [t for t in train if t is not task and t.name != task.name]

        settings = PriorSettings(
            iterations=args.prior_iterations,
            transfer=args.transfer,
            **_overrides(args.prior_setting, parser),
        )
        reports = evaluate(
            test,
            history_of,
            args.seeds,
            args.max_evals,
            methods,
            settings,
            lambda line: console.print(line, highlight=False),
            service_pool=args.kb is not None,
        )
        totals = summary(reports, methods)
    if args.json:
        print_json(
            {
                "methods": totals,
                "metatune_vs_portfolio": versus_portfolio(totals),
                "tasks": [task_json(r) for r in reports],
                "protocol": {
                    "seeds": args.seeds,
                    "max_evals": args.max_evals,
                    "title": title,
                    "pool": "the task's rows and the knowledge base's"
                    if args.kb
                    else "the task's rows",
                    "prior": settings.__dict__,
                },
            }
        )
    else:
        print_tables(reports, totals, methods, console, title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
