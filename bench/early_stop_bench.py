"""Early-stop benchmark: the learning-curve stopper replayed on held-out datasets of the knowledge base.

Leave one dataset out: for each dataset, the stopper is fitted on the other datasets' curves, then
that dataset's runs are replayed as one study, in the knowledge base's order and in ``--orders - 1``
random orders (seeded). A run is checked at each of its evaluations against the study's best so far
(the best final metric of the runs before it; a stopped run counts with the metric it stopped at).
In the same replay, baselines:

  none     every run to the end (the build as it was)
  plateau  the agent's plateau rule on the validation loss (domain/plateau.py, default settings)
  median   the median stopping rule (Golovin et al. 2017): from 25 % of the run, stop when the run's
           best metric so far is below the median of the finished runs' running means at that point
  curve    the learning-curve stopper at --confidence (and --margin), as the agent runs it: normalised
           conformal bands (a model of each run's residual size) and the pace guard (a run whose own
           pace, carried over the learning rate still to come, would overtake the best is not stopped)
  curve-unguarded  the same without the pace guard
  curve-plain      with --compare-plain: one band width for all runs (guarded)

compute saved = share of the replayed runs' training seconds (inside optimizer steps) not spent;
best run stopped = share of studies where every run that ended with the study's best final metric
was stopped (the study lost its best); best lost beyond tolerance = share of studies whose best found
is more than --tolerance below the true best (a "best" that another run matches within evaluation
noise is not lost); regret = true best - best found, mean over studies.

    python bench/early_stop_bench.py --kb services/recommender/src/metatune_recommender/data/seed_kb.jsonl
    python bench/early_stop_bench.py --kb FILE --json --confidence 0.9 0.95 0.99
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from metatune.knowledge.records import KbRun
from metatune_kb.adapters.stopper import read_runs
from metatune_trainer_agent.domain.curve_stop import (
    DEFAULT_GRID,
    Curve,
    CurveStopper,
    TrainingCurve,
)
from metatune_trainer_agent.domain.plateau import PlateauDetector

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import progress


@dataclass(frozen=True)
class Trial:
    run_id: str
    curve: TrainingCurve
    points: tuple[
        tuple[float, float, float | None], ...
    ]  # (fraction, metric, val_loss), 0 first, 1.0 last
    seconds: float
    steps: int

    @property
    def final(self) -> float:
        return self.points[-1][1]


@dataclass
class Replayed:
    spent: float = 0.0
    total: float = 0.0
    spent_steps: float = 0.0
    total_steps: float = 0.0
    stopped_runs: int = 0
    runs: int = 0
    studies: int = 0
    best_lost: int = 0
    best_lost_beyond_tolerance: int = 0
    regret: float = 0.0

    def add(self, other: Replayed) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


# A policy: (trial, index of the evaluation point, finished trials as (trial, stopped_at or None), best) -> stop?
Policy = Callable[[Trial, int, list[tuple[Trial, int | None]], float | None], bool]


def trials_of(runs: list[KbRun]) -> dict[str, list[Trial]]:
    found: dict[str, list[Trial]] = defaultdict(list)
    for run in runs:
        curve = TrainingCurve.of_kb_run(run)
        if curve is None or curve.final is None or curve.curve.points[0][0] > 0:
            continue
        seconds = run.train_seconds if run.train_seconds else run.wall_seconds
        found[run.dataset.name].append(
            Trial(run.run_id, curve, curve.curve.points, seconds, run.steps)
        )
    return found


def replay(trials: list[Trial], policy: Policy | None, tolerance: float = 0.0) -> Replayed:
    done: list[tuple[Trial, int | None]] = []
    best: float | None = None
    out = Replayed(studies=1)
    for trial in trials:
        stopped_at = None
        if policy is not None:
            for i in range(1, len(trial.points) - 1):
                if policy(trial, i, done, best):
                    stopped_at = i
                    break
        fraction = trial.points[stopped_at][0] if stopped_at is not None else 1.0
        reached = trial.points[stopped_at][1] if stopped_at is not None else trial.final
        best = reached if best is None else max(best, reached)
        done.append((trial, stopped_at))
        out.spent += fraction * trial.seconds
        out.total += trial.seconds
        out.spent_steps += fraction * trial.steps
        out.total_steps += trial.steps
        out.stopped_runs += stopped_at is not None
        out.runs += 1
    true_best = max(t.final for t in trials)
    winners = [s for t, s in done if t.final >= true_best - 1e-12]
    out.best_lost = int(all(s is not None for s in winners))
    out.regret = true_best - (best if best is not None else true_best)
    out.best_lost_beyond_tolerance = int(out.regret > tolerance + 1e-12)
    return out


def plateau_policy(trial: Trial, i: int, done: list, best: float | None) -> bool:
    detector = PlateauDetector()
    stop = False
    for _, _, loss in trial.points[: i + 1]:
        if loss is None:
            return False
        stop = detector.update(loss)
    return stop


def median_policy(
    trial: Trial, i: int, done: list[tuple[Trial, int | None]], best: float | None
) -> bool:
    fraction = trial.points[i][0]
    finished = [t for t, s in done if s is None]
    if fraction < 0.25 or len(finished) < 3:
        return False
    means = []
    for t in finished:
        seen = [m for f, m, _ in t.points[1:] if f <= fraction + 1e-9]
        if seen:
            means.append(sum(seen) / len(seen))
    own_best = max(m for _, m, _ in trial.points[1 : i + 1])
    return bool(means) and own_best < statistics.median(means)


def curve_policy(
    stopper: CurveStopper, confidence: float, margin: float, guard: bool = True
) -> Policy:
    def decide(trial: Trial, i: int, done: list, best: float | None) -> bool:
        prefix = Curve(trial.points[: i + 1])
        return (
            stopper.should_stop(
                prefix, trial.curve.shape, best, confidence=confidence, margin=margin, guard=guard
            )
            is not None
        )

    return decide


# long: the bench's protocol in order, one block per step of its docstring
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kb", type=Path, required=True, help="knowledge-base file (.jsonl[.gz])")
    parser.add_argument(
        "--confidence",
        type=float,
        nargs="+",
        default=[0.95],
        help="confidence(s) of the upper bound; the first is the headline",
    )
    parser.add_argument("--margin", type=float, default=0.0, help="stop only below best - margin")
    parser.add_argument(
        "--orders", type=int, default=5, help="study orders per dataset: the KB's, then random"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.01,
        help="regret within evaluation noise (default one accuracy point: 2 of the seed's 200 "
        "validation rows) that does not count as losing the best",
    )
    parser.add_argument(
        "--min-runs", type=int, default=4, help="datasets with fewer complete runs are left out"
    )
    parser.add_argument(
        "--compare-plain",
        action="store_true",
        help="add the stopper with one band width for all runs (not normalised)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the headline confidence)"
    )
    args = parser.parse_args()
    console = Console(stderr=args.json, width=150)

    runs = read_runs(args.kb)
    by_dataset = {d: t for d, t in trials_of(runs).items() if len(t) >= args.min_runs}
    if len(by_dataset) < 3:
        sys.exit(
            f"{args.kb}: {len(by_dataset)} datasets with >= {args.min_runs} complete runs; need 3 to leave one out"
        )
    rng = random.Random(args.seed)
    orders = {
        d: [t] + [rng.sample(t, len(t)) for _ in range(args.orders - 1)]
        for d, t in by_dataset.items()
    }

    results: dict[str, Replayed] = defaultdict(Replayed)
    for held_out, studies in progress(orders.items(), "held-out datasets", total=len(orders)):
        train = [t.curve for d, ts in by_dataset.items() if d != held_out for t in ts]
        stopper = CurveStopper.fit(train, grid=DEFAULT_GRID)
        policies: dict[str, Policy | None] = {
            "none": None,
            "plateau": plateau_policy,
            "median": median_policy,
        }
        for c in args.confidence:
            policies[f"curve@{c:g}"] = curve_policy(stopper, c, args.margin)
        for c in args.confidence:
            policies[f"curve-unguarded@{c:g}"] = curve_policy(stopper, c, args.margin, guard=False)
        if args.compare_plain:
            plain = CurveStopper.fit(train, grid=DEFAULT_GRID, normalised=False)
            for c in args.confidence:
                policies[f"curve-plain@{c:g}"] = curve_policy(plain, c, args.margin)
        for study in studies:
            for name, policy in policies.items():
                results[name].add(replay(study, policy, args.tolerance))
        console.print(f"  {held_out}: {len(studies[0])} runs x {len(studies)} orders", style="dim")

    def row(r: Replayed) -> dict[str, float]:
        return {
            "compute_saved_share": 1 - r.spent / r.total,
            "steps_saved_share": 1 - r.spent_steps / r.total_steps,
            "best_run_stopped_share": r.best_lost / r.studies,
            "best_lost_beyond_tolerance_share": r.best_lost_beyond_tolerance / r.studies,
            "runs_stopped_share": r.stopped_runs / r.runs,
            "mean_regret": r.regret / r.studies,
        }

    headline = f"curve@{args.confidence[0]:g}"
    n_runs = sum(len(t) for t in by_dataset.values())
    if args.json:
        print(
            json.dumps(
                {
                    **row(results[headline]),
                    "confidence": args.confidence[0],
                    "margin": args.margin,
                    "tolerance": args.tolerance,
                    "kb": args.kb.name,
                    "datasets": len(by_dataset),
                    "runs": n_runs,
                    "studies": results[headline].studies,
                    "baselines": {name: row(r) for name, r in results.items() if name != headline},
                }
            )
        )
        return
    table = Table(
        title=f"early stopping, leave one dataset out: {len(by_dataset)} datasets, {n_runs} runs, "
        f"{args.orders} orders each ({results['none'].studies} studies), {args.kb.name}"
    )
    for column in (
        "policy",
        "compute saved",
        "steps saved",
        "runs stopped",
        "best run stopped",
        f"best lost > {args.tolerance:g}",
        "mean regret",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, r in results.items():
        x = row(r)
        table.add_row(
            name,
            f"{x['compute_saved_share']:.1%}",
            f"{x['steps_saved_share']:.1%}",
            f"{x['runs_stopped_share']:.1%}",
            f"{x['best_run_stopped_share']:.1%}",
            f"{x['best_lost_beyond_tolerance_share']:.1%}",
            f"{x['mean_regret']:.4f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
