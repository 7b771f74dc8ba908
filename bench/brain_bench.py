"""The Brain end to end: on datasets it has never seen, what does a user get from its top-3?

For every classification file in ``--data`` (laid out like ``../shared/data/text``), trained on
the platform's own ``run_training`` at ``--budget`` (default: a study's default, 3 epochs over at
most 1,000 training rows; ``kb``: the first knowledge base's own, its header's
``provenance.budget``), the budget the recommender is asked to predict at:

  top3        the recommender's top-3 for the dataset's profile, as ``metatune recommend`` gives
              it from ``--kb`` (repeatable; default: every shipped seed, as the service loads)
  portfolio3  the first 3 of the knowledge base's greedy portfolio (``metatune kb portfolio``:
              for the shipped seed, the recommender's cold-start list)
  random      a seeded pool of ``--random-k`` configurations drawn uniformly from the search
              space the knowledge base is built over (``metatune.knowledge.space``); with
              ``--random-pool kb``, the dataset's own design runs in the first knowledge base
              instead (``metatune kb build``'s shared and local scrambled Sobol designs: draws from
              the same space, already trained at the same budget and seed; the repeats' other
              seeds left out)

A dataset the knowledge base holds is left out of it for that dataset (its runs are dropped
before the recommender and the portfolio see the base): every dataset is unseen. The slices and
profiles are the build's (``metatune kb build``: the first train + validation rows, profiled by
``metatune profile --json``), every run keeps the build's seed, and a configuration chosen by more
than one arm is trained once, and one the first knowledge base already trained on that dataset at
the bench's budget (its header's), base model and seed is read from it instead of trained again
(``reused_runs``: the same slice, configuration, seed and code path; a retrain differs only by
floating-point order, e.g. another thread count: seed v3's cr_reviews c000 retrained on 2 threads
reached the same accuracy, 0.65, at validation loss 0.6487 against the build's 0.6491).

Figures per dataset: the best of each arm; the expected best of k random configurations for every
k up to the pool (exact: the expectation of the best of k drawn without replacement from the
pool); the best of everything trained; the regrets (best of all minus each); and the largest k
whose expected best the top-3's best matches or exceeds (``top3_vs_random_k``: the top-3 is
worth that many random trainings), and whether each top-3 run fell inside the 80 % interval the
recommender published for it. Overall: the median of that k, the share of datasets where the
top-3's best beats the portfolio's (strictly), the mean regrets, ``interval_coverage`` (the share
of trained top-3 runs inside their interval) and ``interval_median_width``, the seconds spent
training.

Resumable: each finished run is one line of ``WORK/runs.jsonl`` (a knowledge-base file, fsynced
as the run finishes); a restart trains only what that file lacks. ``--jobs N`` trains N runs at
once, each in a spawned process with its share of the cores (a run's figures do not depend on it). ``WORK/plans`` keeps each
dataset's configurations, so a restart trains the same ones. Meant for the background:

    nohup python bench/brain_bench.py --data DIR --work WORK --jobs 2 --json > brain.json 2> brain.log &
    python bench/brain_bench.py --data ../shared/data/text --kb seed.jsonl --random-k 12
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import hashlib
import json
import math
import multiprocessing
import os
import statistics
import sys
import zlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import finite, print_json, progress, stdout_to_stderr
from pydantic import ValidationError

from metatune.contracts import LoraConfig, MetaFeatures, TrainingBudget, validation_summary
from metatune.knowledge.errors import KnowledgeBaseError
from metatune.knowledge.files import read_kb_file
from metatune.knowledge.records import KbFileHeader, KbRun
from metatune.knowledge.space import DIMENSIONS, Budget, decode
from metatune.models import EMBEDDED_MODEL
from metatune_kb.domain.portfolio import config_key, greedy_portfolio

if TYPE_CHECKING:  # the trainer (torch) loads only when something trains
    from metatune_kb.adapters.build import BuildSettings
    from metatune_kb.adapters.slices import DataSlice

ARMS = ("top3", "portfolio3", "random")
TOP = 3
TOLERANCE = 1e-9  # "matches": equal up to float rounding


class BenchError(RuntimeError):
    """The bench cannot run as asked (no budget in the knowledge base, a work folder of another run)."""


# ====================================================================== the figures (pure)
def expected_best_of_k(pool: Sequence[float]) -> list[float]:
    """E[max of k configurations drawn without replacement from ``pool``] for k = 1 .. len(pool).

    Exact order statistics: with the pool sorted ascending, the i-th value (1-based) is the best of
    a k-subset in C(i-1, k-1) of the C(n, k) subsets."""
    values = sorted(pool)
    n = len(values)
    return [
        sum(values[i - 1] * math.comb(i - 1, k - 1) for i in range(k, n + 1)) / math.comb(n, k)
        for k in range(1, n + 1)
    ]


def matched_k(best: float | None, expected: Sequence[float]) -> int | None:
    """The largest k whose expected best of k random configurations ``best`` matches or exceeds;
    0 when it falls short of even one random configuration's expectation; None without a best."""
    if best is None:
        return None
    return max((k for k, e in enumerate(expected, start=1) if best >= e - TOLERANCE), default=0)


def _best(values: Sequence[float | None]) -> float | None:
    measured = [v for v in values if v is not None]
    return max(measured) if measured else None


def dataset_figures(
    top3: Sequence[float | None],
    portfolio3: Sequence[float | None],
    pool: Sequence[float | None],
    intervals: Sequence[Sequence[float] | None] = (),
) -> dict[str, Any]:
    """One dataset's figures from each arm's metrics (None: a run that failed) and the 80 %
    intervals published for the top-3 (None where none was)."""
    expected = expected_best_of_k([v for v in pool if v is not None])
    top, port = _best(top3), _best(portfolio3)
    best_all = _best([*top3, *portfolio3, *pool])

    def regret(value: float | None) -> float | None:
        return None if value is None or best_all is None else best_all - value

    return {
        "top3": list(top3),
        "top3_best": top,
        "portfolio3": list(portfolio3),
        "portfolio3_best": port,
        "random_pool": list(pool),
        "random_k_expected_best": expected,  # item k-1: the expected best of k
        "best_all": best_all,
        "regret_top3": regret(top),
        "regret_portfolio3": regret(port),
        "regret_random_k": [regret(e) for e in expected],
        "top3_vs_random_k": matched_k(top, expected),
        "top3_beats_portfolio3": None if top is None or port is None else top > port,
        "top3_intervals": [list(i) if i else None for i in intervals],
        "top3_inside_interval": [
            None if value is None or not band else band[0] <= value <= band[1]
            for value, band in zip(top3, intervals, strict=False)
        ],
    }


def _mean(values: Sequence[float | None]) -> float | None:
    measured = [v for v in values if v is not None]
    return statistics.fmean(measured) if measured else None


def summarise(datasets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The overall figures over the datasets' figures (each with its ``dataset`` name)."""
    scored = [d for d in datasets if d.get("top3_best") is not None]
    ks = {d["dataset"]: d["top3_vs_random_k"] for d in scored}
    beats = [d["top3_beats_portfolio3"] for d in scored if d["top3_beats_portfolio3"] is not None]
    inside = [v for d in scored for v in d.get("top3_inside_interval", []) if v is not None]
    widths = [b[1] - b[0] for d in scored for b in d.get("top3_intervals", []) if b]
    return {
        "top3_vs_random_k": {
            "per_dataset": ks,
            "median": statistics.median(ks.values()) if ks else None,
        },
        "interval_coverage": sum(inside) / len(inside) if inside else None,
        "interval_median_width": statistics.median(widths) if widths else None,
        "top3_beats_portfolio3_share": sum(beats) / len(beats) if beats else None,
        "mean_regret_top3": _mean([d["regret_top3"] for d in scored]),
        "mean_regret_portfolio3": _mean([d["regret_portfolio3"] for d in scored]),
    }


def mean_by_k(datasets: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    """Item k-1: the mean over the datasets whose pool reaches k of their ``key`` list's item."""
    longest = max((len(d.get(key) or []) for d in datasets), default=0)
    return [
        _mean([d[key][k] for d in datasets if len(d.get(key) or []) > k]) for k in range(longest)
    ]


# ====================================================================== the plan
def budget_of(header: KbFileHeader, path: Path) -> dict[str, Any]:
    """The budget the knowledge base was built at (``metatune kb build`` records it in the header)."""
    budget = header.provenance.get("budget")
    if not isinstance(budget, dict) or not (budget.get("max_steps") or budget.get("epochs")):
        raise BenchError(
            f"{path}: its header records no training budget (provenance.budget with max_steps or "
            "epochs, as `metatune kb build` writes it)"
        )
    missing = [key for key in ("train_rows", "val_rows") if not budget.get(key)]
    if missing:
        raise BenchError(f"{path}: its header's budget lacks {', '.join(missing)}")
    return budget


def space_budget(budget: Mapping[str, Any]) -> Budget:
    if budget.get("epochs"):
        return Budget(
            max_steps=None,
            epochs=float(budget["epochs"]),
            max_seq_length=int(budget.get("max_seq_length") or 128),
        )
    return Budget(
        max_steps=int(budget["max_steps"]),
        max_seq_length=int(budget.get("max_seq_length") or 128),
    )


def at_budget(config: Mapping[str, Any], budget: Budget, seed: int) -> dict[str, Any]:
    """``config`` as the knowledge base's runs trained: its budget, its seed."""
    values = {
        **config,
        "max_steps": budget.max_steps,
        "epochs": None if budget.max_steps is not None else budget.epochs,
        "max_seq_length": budget.max_seq_length,
        "max_train_rows": None,  # the slice holds the budget's rows
        "seed": seed,
    }
    return LoraConfig.model_validate(values).model_dump(mode="json")


def random_pool(name: str, k: int, seed: int, budget: Budget) -> list[dict[str, Any]]:
    """``k`` configurations drawn uniformly from the search space, seeded by ``seed`` and the
    dataset's name (each dataset its own pool; a larger k extends the same pool)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return [
        decode(point, budget=budget).model_dump(mode="json")
        for point in rng.random((k, len(DIMENSIONS)))
    ]


def same_budget(built: Mapping[str, Any], budget: Mapping[str, Any]) -> bool:
    """Whether a knowledge base built at ``built`` (its header's budget) trained its runs as the
    bench trains at ``budget``: the same rows, steps or epochs, evaluations and length."""
    keys = ("train_rows", "val_rows", "epochs", "max_steps", "evaluations", "max_seq_length")
    return all(built.get(key) == budget.get(key) for key in keys) and (
        built.get("precision") or "auto"
    ) == (budget.get("precision") or "auto")


def run_id(name: str, config: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(config_key(dict(config)).encode()).hexdigest()[:12]
    return f"brain-bench:{name}:{digest}:s{config.get('seed')}"


@dataclass(frozen=True)
class Plan:
    """One dataset's configurations per arm (run ids), and each run's configuration."""

    dataset: str
    source: str  # the recommender's answer: knowledge-base | cold-start
    left_out: bool  # the dataset was in the knowledge base, and left out of it for this plan
    arms: dict[str, list[str]]
    configs: dict[str, dict[str, Any]]
    recommender_code: str | None  # the recommender's code version that chose the top-3
    intervals: list[list[float] | None] = dataclasses.field(default_factory=list)  # top-3's 80 %

    @classmethod
    def of(
        cls,
        dataset: str,
        source: str,
        left_out: bool,
        chosen: Mapping[str, Sequence[Mapping[str, Any]]],
        budget: Budget,
        seed: int,
        recommender_code: str,
        intervals: Sequence[Sequence[float] | None] = (),
    ) -> Plan:
        arms: dict[str, list[str]] = {}
        configs: dict[str, dict[str, Any]] = {}
        for arm, arm_configs in chosen.items():
            arms[arm] = []
            for config in arm_configs:
                trained = at_budget(config, budget, seed)
                key = run_id(dataset, trained)
                arms[arm].append(key)
                configs[key] = trained
        bands = [list(band) if band else None for band in intervals]
        return cls(dataset, source, left_out, arms, configs, recommender_code, bands)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "source": self.source,
            "left_out": self.left_out,
            "arms": self.arms,
            "configs": self.configs,
            "recommender_code": self.recommender_code,
            "intervals": self.intervals,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        return cls(
            data["dataset"],
            data["source"],
            data["left_out"],
            data["arms"],
            data["configs"],
            data.get("recommender_code"),
            data.get("intervals") or [],
        )


# ====================================================================== the work folder
@dataclass(frozen=True)
class Work:
    root: Path

    @property
    def runs(self) -> Path:
        return self.root / "runs.jsonl"

    def plan(self, dataset: str) -> Path:
        return self.root / "plans" / f"{dataset}.json"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One bench per work folder: a second would append the same runs twice."""
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / ".lock").open("w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BenchError(f"another brain_bench is running on {self.root}") from None
            yield

    def check_settings(self, settings: Mapping[str, Any]) -> None:
        """A work folder serves one set of settings: a restart with others would mix two benches."""
        path = self.root / "settings.json"
        if path.is_file():
            before = json.loads(path.read_text(encoding="utf-8"))
            if before != settings:
                changed = sorted(
                    k for k in {*before, *settings} if before.get(k) != settings.get(k)
                )
                raise BenchError(
                    f"{self.root} holds a bench with other settings ({', '.join(changed)}): "
                    "use another --work"
                )
            return
        _write_atomic(path, json.dumps(settings, indent=2, sort_keys=True))


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def append_line(path: Path, line: str) -> None:
    """One run per line, on disk before the next run starts."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def kb_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# ====================================================================== the bench
@dataclass
class Dataset:
    name: str
    data: DataSlice
    features: MetaFeatures
    plan: Plan


def train_run(settings: BuildSettings, dataset: Dataset, key: str) -> KbRun:
    """One planned run of ``dataset`` trained by the platform's ``run_training`` at the bench's
    budget, recorded as ``metatune kb build`` records a run (a failed run is a failed record)."""
    from metatune_kb.adapters.build import (
        failed_record,
        to_record,
        training_request,
    )
    from metatune_kb.domain.design import PlannedRun
    from metatune_trainer_agent.adapters.training import run_training
    from metatune_trainer_agent.domain.errors import TrainingError

    config = LoraConfig.model_validate(dataset.plan.configs[key])
    planned = PlannedRun(key, dataset.name, 0, config.seed, config)
    try:
        outcome = run_training(training_request(settings, dataset.data, planned))
        record = to_record(planned, dataset.data, dataset.features, outcome, settings, None)
    except TrainingError as exc:
        record = failed_record(planned, dataset.data, dataset.features, settings, exc, None)
    provenance = record.provenance.model_copy(update={"source": "brain-bench"})
    return record.model_copy(update={"provenance": provenance})


def _one_job(threads: int) -> None:
    """A training process's share of the cores (``--jobs``: the cores split between them); it ends
    with the bench (a killed bench leaves no run training for no one)."""
    import torch

    from metatune.processes import die_with_parent

    die_with_parent()
    torch.set_num_threads(threads)


class Bench:
    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.args = args
        self.console = console
        self.kb_paths: list[Path] = args.kb or _seed_paths()
        self.kb_path = self.kb_paths[0]  # its header: the base model, seed and its own budget
        try:
            files = [read_kb_file(path) for path in self.kb_paths]
        except KnowledgeBaseError as exc:
            raise BenchError(f"knowledge base unreadable: {exc}") from exc
        kb = files[0]
        self.runs = [run for file in files for run in file.runs]
        self.study_budget, self.budget = study_budget(
            args.budget, budget_of(kb.header, self.kb_path)
        )
        self.base_model: str = kb.header.provenance.get("base_model") or EMBEDDED_MODEL
        design = kb.header.provenance.get("design")
        self.seed = int(design.get("seed", 13)) if isinstance(design, dict) else 13
        self.space = space_budget(self.budget)
        # the first knowledge base's runs trained as the bench trains (its budget, model, seed)
        built = kb.header.provenance.get("budget")
        trained_alike = (
            isinstance(built, dict)
            and same_budget(built, self.budget)
            and kb.header.provenance.get("base_model") == self.base_model
        )
        self.trained_before: dict[str, KbRun] = {}
        for run in kb.runs if trained_alike else []:
            if run.seed == self.seed and run.metric is not None:
                config = at_budget(run.config, self.space, self.seed)
                self.trained_before.setdefault(run_id(run.dataset.name, config), run)
        self.work = Work(args.work)
        self.settings = self._build_settings()
        self.recommenders: dict[str | None, Any] = {}
        self.loads: list[float] = []  # the 1-minute load before each run this session trained

    def _build_settings(self) -> BuildSettings:
        from metatune_kb.adapters.build import BuildSettings

        budget = self.budget
        extra: dict[str, Any] = {"epochs": float(budget["epochs"])} if budget.get("epochs") else {}
        return BuildSettings(
            data_dir=self.args.data,
            out=self.work.runs,
            work_dir=self.work.root,
            datasets=self.args.datasets,
            train_rows=int(budget["train_rows"]),
            val_rows=int(budget["val_rows"]),
            max_steps=int(budget.get("max_steps") or BuildSettings.max_steps),
            evaluations=int(budget.get("evaluations") or BuildSettings.evaluations),
            max_seq_length=self.space.max_seq_length,
            precision=str(budget.get("precision") or "auto"),
            seed=self.seed,
            base_model=self.base_model,
            device=self.args.device,
            **extra,
        )

    def identity(self) -> dict[str, Any]:
        pool = (
            {"random_pool": "kb"}
            if self.args.random_pool == "kb"
            else {"random_k": self.args.random_k, "random_seed": self.args.random_seed}
        )
        return {
            # with their digests: the same base from any checkout
            "kb": ", ".join(path.name for path in self.kb_paths),
            "kb_sha256": ", ".join(kb_digest(path) for path in self.kb_paths),
            **pool,
            "budget": self.budget,
            "base_model": self.base_model,
        }

    def design_pool(self, name: str) -> list[dict[str, Any]]:
        """``name``'s own design runs in the first knowledge base, at the bench's budget and seed
        (``--random-pool kb``): draws from the search space, already trained."""
        pool = [
            dict(run.config)
            for key, run in sorted(self.trained_before.items())
            if run.dataset.name == name
        ]
        if not pool:
            raise BenchError(
                f"--random-pool kb: {self.kb_path.name} holds no run of {name} at this budget and "
                f"seed ({budget_text(self.budget)}, seed {self.seed}): draw the pool instead"
            )
        return pool

    # ------------------------------------------------------------------ planning
    def recommender(self, left_out: str | None) -> Any:
        from metatune_recommender.domain.recommender import Recommender

        if left_out not in self.recommenders:
            runs = [r for r in self.runs if r.dataset.name != left_out]
            self.recommenders[left_out] = Recommender(runs)
        return self.recommenders[left_out]

    def plan(self, name: str, features: MetaFeatures) -> Plan:
        """The dataset's plan: read back from the work folder, or chosen now and written there.
        A plan another version of the recommender chose is chosen again: the bench measures the
        recommender it runs with (runs already trained are kept, by configuration)."""
        from metatune_recommender.adapters.prior_cache import scorer_code_version

        path = self.work.plan(name)
        code = scorer_code_version()
        if path.is_file():
            stored = Plan.from_json(json.loads(path.read_text(encoding="utf-8")))
            if stored.recommender_code == code:
                return stored
            self.console.print(f"{name}: planned by another recommender version, planned again")
        from metatune_recommender.domain.recommender import profile_descriptors

        left_out = any(r.dataset.name == name for r in self.runs)
        recommender = self.recommender(name if left_out else None)
        # what `metatune recommend PROFILE.json --kb FILE` does with the profile's JSON features
        advice = recommender.recommend(
            self.base_model,
            profile_descriptors(features.model_dump(mode="json")),
            TOP,
            budget=self.study_budget,
        )
        history = [r for r in recommender.runs if r.base_model == self.base_model]
        chosen = {
            "top3": [rec.config.model_dump(mode="json") for rec in advice.recommendations],
            "portfolio3": [entry.config for entry in greedy_portfolio(history, TOP)],
            "random": self.design_pool(name)
            if self.args.random_pool == "kb"
            else random_pool(name, self.args.random_k, self.args.random_seed, self.space),
        }
        intervals = [rec.interval for rec in advice.recommendations]
        plan = Plan.of(
            name, advice.source, left_out, chosen, self.space, self.seed, code, intervals
        )
        _write_atomic(path, json.dumps(plan.to_json(), indent=2))
        return plan

    def prepare(self, files: list[Path]) -> tuple[list[Dataset], dict[str, str]]:
        from metatune_kb.adapters.build import profile
        from metatune_kb.adapters.kb_file import BuildError
        from metatune_kb.adapters.slices import dataset_name, make_slice

        slices = self.work.root / "slices"
        prepared: list[Dataset] = []
        skipped: dict[str, str] = {}
        for path in progress(files, "profiling and planning"):
            name = dataset_name(path)
            try:
                data = make_slice(
                    path,
                    slices,
                    train_rows=self.settings.train_rows,
                    val_rows=self.settings.val_rows,
                )
                features = profile(
                    data.train_path,
                    slices / f"{name}.profile.json",
                    self.base_model,
                    pair=data.task.value == "pair_classification",
                )
            except (ValueError, BuildError) as exc:
                skipped[name] = str(exc)
                self.console.print(f"[yellow]skipped[/yellow] {name}: {exc}")
                continue
            prepared.append(Dataset(name, data, features, self.plan(name, features)))
        return prepared, skipped

    # ------------------------------------------------------------------ training
    def reuse(self, datasets: list[Dataset], done: dict[str, KbRun]) -> None:
        """The planned runs the first knowledge base already trained alike, recorded as the
        bench's own (their id, source ``brain-bench``, the knowledge base's run named)."""
        for dataset in datasets:
            for key in dataset.plan.configs:
                before = self.trained_before.get(key)
                if key in done or before is None:
                    continue
                provenance = before.provenance.model_copy(
                    update={"source": "brain-bench", "note": f"read from {before.run_id}"}
                )
                record = before.model_copy(update={"run_id": key, "provenance": provenance})
                append_line(self.work.runs, record.model_dump_json())
                done[key] = record

    def train(self, datasets: list[Dataset], done: dict[str, KbRun]) -> dict[str, KbRun]:
        """Train every planned run ``done`` lacks, ``--jobs`` at a time, each result appended to
        the results file as it finishes (a kill loses at most the runs in flight)."""
        self.reuse(datasets, done)
        todo = [
            (dataset, key)
            for dataset in datasets
            for key in dataset.plan.configs
            if key not in done
        ]
        loads: list[float] = []
        tty = self.console.is_terminal
        finished = progress(self._trained(todo, loads), "training", total=len(todo))
        for number, (dataset, key, record) in enumerate(finished, start=1):
            append_line(self.work.runs, record.model_dump_json())
            done[key] = record
            if not tty:  # in the background: one line per run for the log
                self.console.print(
                    f"[{number}/{len(todo)}] {dataset.name} {key.split(':')[2]}: "
                    f"{record.status.value} {record.metric} ({record.wall_seconds:.0f} s)",
                    markup=False,
                    highlight=False,
                )
        self.loads = loads
        return done

    def _trained(
        self, todo: list[tuple[Dataset, str]], loads: list[float]
    ) -> Iterator[tuple[Dataset, str, KbRun]]:
        """Each run of ``todo`` trained: in this process, one after another, or in ``--jobs``
        spawned processes (the cores shared out between them for torch), as each finishes."""
        jobs = min(self.args.jobs, len(todo))
        if jobs <= 1:
            for dataset, key in todo:
                loads.append(os.getloadavg()[0])
                yield dataset, key, train_run(self.settings, dataset, key)
            return
        threads = max(1, (os.cpu_count() or 1) // jobs)
        context = multiprocessing.get_context("spawn")  # never fork a process holding torch
        with ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_one_job, initargs=(threads,)
        ) as pool:
            running = {
                pool.submit(train_run, self.settings, dataset, key): (dataset, key)
                for dataset, key in todo
            }
            for future in as_completed(running):
                loads.append(os.getloadavg()[0])
                dataset, key = running[future]
                yield dataset, key, future.result()

    # ------------------------------------------------------------------ the whole run
    def run(self) -> dict[str, Any]:
        from metatune_kb.adapters.build import discover, machine
        from metatune_kb.adapters.kb_file import BuildError, read_existing
        from metatune_recommender.adapters.prior_cache import scorer_code_version

        started = datetime.now(UTC)
        load_start = os.getloadavg()[0]
        with self.work.locked():
            try:
                files = discover(self.settings)
                self.work.check_settings(self.identity())
                if not self.work.runs.exists() or self.work.runs.stat().st_size == 0:
                    header = KbFileHeader(
                        provenance={
                            "source": "brain-bench",
                            "machine": machine(),
                            **self.identity(),
                        }
                    )
                    append_line(self.work.runs, header.model_dump_json())
                done = read_existing(self.work.runs)
            except BuildError as exc:
                raise BenchError(str(exc)) from exc
            datasets, skipped = self.prepare(files)
            left_out = [d.name for d in datasets if d.plan.left_out]
            if left_out:
                self.console.print(
                    f"in the knowledge base, so left out of it for their own plan: {', '.join(left_out)}"
                )
            done = self.train(datasets, done)
        figures = [self.figures(d, done) for d in datasets]
        figures += [{"dataset": name, "skipped": reason} for name, reason in skipped.items()]
        return {
            "budget": self.study_budget.model_dump(mode="json"),
            "datasets": figures,
            **summarise(figures),
            "train_seconds": round(sum(f.get("train_seconds", 0.0) for f in figures), 1),
            "random_pool": self.args.random_pool,
            "reused_runs": sum(f.get("reused_runs", 0) for f in figures),
            "recommender_code": scorer_code_version(),
            "machine": machine(),
            "date": started.isoformat(timespec="seconds"),
            "load": {
                "avg_1m_start": round(load_start, 2),
                "avg_1m_end": round(os.getloadavg()[0], 2),
                "avg_1m_mean_while_training": round(statistics.fmean(self.loads), 2)
                if self.loads
                else None,
            },
        }

    def figures(self, dataset: Dataset, done: Mapping[str, KbRun]) -> dict[str, Any]:
        def metrics(arm: str) -> list[float | None]:
            return [done[key].metric for key in dataset.plan.arms[arm]]

        runs = [done[key] for key in dataset.plan.configs]
        return {
            "dataset": dataset.name,
            "source": dataset.plan.source,
            "left_out_of_kb": dataset.plan.left_out,
            "n_train": dataset.data.n_train,
            "n_val": dataset.data.n_val,
            "majority_baseline": dataset.data.majority_baseline,
            **dataset_figures(
                metrics("top3"), metrics("portfolio3"), metrics("random"), dataset.plan.intervals
            ),
            "failed_runs": sum(r.metric is None for r in runs),
            "reused_runs": sum((r.provenance.note or "").startswith("read from ") for r in runs),
            "train_seconds": round(sum(r.train_seconds or 0.0 for r in runs), 1),
        }


def _seed_paths() -> list[Path]:
    from metatune_recommender.adapters.seeds import seed_paths

    return [path for path in seed_paths() if path.is_file()]


EVERY_ROW = 1_000_000_000  # a slice's train rows where the budget caps none


def study_budget(spec: str, kb_budget: Mapping[str, Any]) -> tuple[TrainingBudget, dict[str, Any]]:
    """The budget the bench trains and asks predictions at, from ``--budget``: ``default`` (a
    study's default), ``kb`` (the knowledge base's own) or ``field=value,...`` of a study's
    budget (``epochs=1``, ``max_steps=200,max_train_rows=none``); with the knowledge base's
    header budget completed by it (validation rows, evaluations, sequence length, precision)."""
    if spec == "kb":
        budget = TrainingBudget.model_validate(
            {
                "epochs": kb_budget.get("epochs") or None,
                "max_steps": None if kb_budget.get("epochs") else kb_budget.get("max_steps"),
                "max_train_rows": kb_budget["train_rows"],
            }
        )
    else:
        fields: dict[str, Any] = {}
        for part in [] if spec == "default" else spec.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise BenchError(f"--budget {spec!r}: give default, kb or field=value,...")
            fields[key.strip()] = None if value.strip().lower() == "none" else value.strip()
        try:
            budget = TrainingBudget.model_validate(fields)
        except ValidationError as exc:
            raise BenchError(f"--budget {spec!r}: {validation_summary(exc)}") from None
    training = {
        **kb_budget,
        "epochs": budget.epochs,
        "max_steps": budget.max_steps,
        "train_rows": budget.max_train_rows or EVERY_ROW,
    }
    return budget, training


# ====================================================================== output
def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def budget_text(budget: Mapping[str, Any]) -> str:
    steps = f"{budget['epochs']} epochs" if budget.get("epochs") else f"{budget['max_steps']} steps"
    rows = "every" if budget["train_rows"] >= EVERY_ROW else f"at most {budget['train_rows']}"
    return (
        f"{rows} train / {budget['val_rows']} validation rows, {steps}, "
        f"max length {budget.get('max_seq_length') or 128}"
    )


def print_tables(report: Mapping[str, Any], console: Console, title: str) -> None:
    scored = [d for d in report["datasets"] if "skipped" not in d]
    table = Table(title=f"Brain bench: {title}")
    for column in (
        "dataset",
        "recommender",
        "top-3 best",
        "portfolio-3 best",
        escape("E[best of 3 random]"),
        "best of all",
        "regret top-3",
        "regret portfolio-3",
        "top-3 = random k",
    ):
        table.add_column(column, justify="left" if column == "dataset" else "right")

    def third(values: Sequence[float | None]) -> float | None:
        return values[2] if len(values) > 2 else None

    for d in scored:
        table.add_row(
            d["dataset"] + (" (left out)" if d["left_out_of_kb"] else ""),
            d["source"],
            _cell(d["top3_best"]),
            _cell(d["portfolio3_best"]),
            _cell(third(d["random_k_expected_best"])),
            _cell(d["best_all"]),
            _cell(d["regret_top3"]),
            _cell(d["regret_portfolio3"]),
            "-" if d["top3_vs_random_k"] is None else str(d["top3_vs_random_k"]),
        )
    table.add_row(
        "overall",
        "mean",
        _cell(_mean([d["top3_best"] for d in scored])),
        _cell(_mean([d["portfolio3_best"] for d in scored])),
        _cell(third(mean_by_k(scored, "random_k_expected_best"))),
        _cell(_mean([d["best_all"] for d in scored])),
        _cell(report["mean_regret_top3"]),
        _cell(report["mean_regret_portfolio3"]),
        f"median {report['top3_vs_random_k']['median']}",
    )
    console.print(table)
    regrets = mean_by_k(scored, "regret_random_k")
    by_k = Table(title="expected best of k random configurations (last row: the mean regret)")
    by_k.add_column("dataset")
    for k in range(1, len(regrets) + 1):
        by_k.add_column(str(k), justify="right")
    for d in scored:
        by_k.add_row(d["dataset"], *(_cell(v) for v in d["random_k_expected_best"]))
    by_k.add_row("mean regret", *(_cell(v) for v in regrets))
    console.print(by_k)
    coverage, width = report["interval_coverage"], report["interval_median_width"]
    if coverage is not None:
        console.print(
            f"80 % intervals: {coverage:.0%} of the trained top-3 runs inside, median width "
            f"{width:.3f}"
        )
    share = report["top3_beats_portfolio3_share"]
    console.print(
        f"top-3 beats portfolio-3 on {'-' if share is None else f'{share:.0%}'} of datasets; "
        f"{report['train_seconds']:.0f} s of training; {report['machine']}, {report['date']}"
    )
    for d in report["datasets"]:
        if "skipped" in d:
            console.print(f"skipped {d['dataset']}: {d['skipped']}")


def _json_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Every float of the report finite or null (a run's NaN never makes invalid JSON), to 6
    decimals (0.15, not 0.14999999999999997)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float):
            measured = finite(value)
            return None if measured is None else round(measured, 6)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, required=True, help="folder of *.jsonl[.gz] text datasets"
    )
    parser.add_argument(
        "--kb",
        type=Path,
        action="append",
        help="knowledge-base file, repeatable (default: every shipped seed); the first one's "
        "header gives the base model, the seed and --budget kb",
    )
    parser.add_argument(
        "--budget",
        default="default",
        help="what each run trains and is predicted at: default (a study's default: 3 epochs "
        "over at most 1,000 rows), kb (the first knowledge base's own) or field=value,... of a "
        "study's budget (epochs=1; max_steps=200,max_train_rows=none)",
    )
    parser.add_argument(
        "--random-k", type=int, default=12, help="random configurations per dataset (the pool)"
    )
    parser.add_argument("--random-seed", type=int, default=0, help="seed of the random pools")
    parser.add_argument(
        "--random-pool",
        choices=("draw", "kb"),
        default="draw",
        help="draw: --random-k configurations drawn here and trained; kb: the dataset's own "
        "design runs in the first knowledge base (trained already, at its budget)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(".metatune/brain_bench"),
        help="slices, plans and the results file (runs.jsonl); a restart resumes from it",
    )
    parser.add_argument("--datasets", help="comma-separated dataset names; default: every file")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda...")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs trained at once, each in a process of its own with a share of the cores",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.random_k < 1:
        parser.error("--random-k must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    args.datasets = args.datasets.split(",") if args.datasets else None
    console = Console(stderr=True, soft_wrap=True)  # one line per message, whatever the width
    try:
        with stdout_to_stderr():  # whatever the trainer prints: stdout is the table or the JSON
            bench = Bench(args, console)
            report = bench.run()
    except (BenchError, KnowledgeBaseError) as exc:
        console.print(f"[red]brain_bench[/red]: {exc}")
        return 2
    if args.json:
        print_json(_json_figures(report))
    else:
        wide = None if sys.stdout.isatty() else 200  # a file gets every column, not 80 wide
        print_tables(
            report,
            Console(width=wide),
            f"{', '.join(p.name for p in bench.kb_paths)}; {budget_text(bench.budget)}",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
