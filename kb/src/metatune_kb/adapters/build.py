"""Run the build: slice, profile, train each planned run once, append it to the knowledge-base file.

Resumable by construction: the output file is the state. Each finished run is one line, written
and fsynced before the next starts; on start the file's run ids are skipped, and a line cut short
by a kill is dropped (that run trains again). Nothing is trained twice, nothing is lost.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from metatune.contracts import MetaFeatures
from metatune.knowledge.records import (
    CurvePoint,
    DatasetInfo,
    Hardware,
    KbFileHeader,
    KbRun,
    Provenance,
    RunStatus,
)
from metatune.knowledge.space import Budget
from metatune.models import EMBEDDED_MODEL
from metatune.processes import die_with_parent
from metatune_profiler.domain.profile import ProfileOptions
from metatune_trainer_agent.adapters.hardware import cpu_model
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.domain.errors import TrainingError
from metatune_trainer_agent.domain.request import TrainingRequest, TrainOptions
from metatune_trainer_agent.domain.run import RunOutcome, Site, total_steps_for

from ..domain.design import PlannedRun, plan_runs
from .kb_file import BuildError, append_line, merge_files, read_existing
from .profiles import profile_dataset
from .slices import DataSlice, dataset_name, make_slice


@dataclass(frozen=True)
class BuildSettings:
    data_dir: Path
    out: Path
    work_dir: Path
    datasets: list[str] | None = (
        None  # names (file stems); None: every classification file in data_dir
    )
    configs: int = 16  # the shared (matched) design: the same configurations on every dataset
    local_configs: int = (
        0  # each dataset's own design (seeded by its name): more than one set of points
    )
    train_rows: int = 2000
    val_rows: int = 256
    max_steps: int = 80  # the budget when ``epochs`` is None: the same steps at every batch size
    # The budget per dataset size: ceil(epochs * train rows / batch size) steps, so every batch size
    # sees the same examples; it wins over max_steps when set.
    epochs: float | None = None
    evaluations: int = 8  # at fixed fractions 1/8, 2/8, ... of each run's own steps (and step 0)
    max_seq_length: int = 128
    repeat_configs: int = 3
    repeat_seeds: tuple[int, ...] = (14, 15)
    repeat_datasets: int = 4
    design_seed: int = 0
    seed: int = 13
    base_model: str = EMBEDDED_MODEL
    precision: str = "auto"
    device: str = "auto"
    limit: int | None = None  # stop after this many new runs (a build in chunks)
    shard: tuple[int, int] = (0, 1)  # (k, n): train only the planned runs whose index % n == k
    done_files: tuple[
        Path, ...
    ] = ()  # other knowledge-base files whose runs count as done (the other shards)
    deadline: float | None = None  # epoch seconds after which no new run starts (a timed build)
    idle_seconds: float = 1.0  # how long each run measures the idle power before training
    id_prefix: str = "seed-kb"  # run ids' prefix: one per build, so several files load side by side
    note: str | None = None  # recorded in the file's header (how this build differs, if it does)


@dataclass
class BuildReport:
    total: int
    done_before: int
    trained: int = 0
    failed: int = 0
    skipped_datasets: dict[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------- provenance
def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def code_version() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
            check=False,
        )
        return out.stdout.strip() or None
    except OSError:
        return None


def licences(data_dir: Path) -> dict[str, str]:
    """Licence per dataset file from the data folder's README table (a ``license`` column), if any."""
    readme = data_dir / "README.md"
    if not readme.is_file():
        return {}
    result: dict[str, str] = {}
    column: int | None = None
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if column is None and any(c.lower() in {"license", "licence"} for c in cells):
            column = next(i for i, c in enumerate(cells) if c.lower() in {"license", "licence"})
            continue
        if column is not None and len(cells) > column and re.search(r"\.jsonl", cells[0]):
            result[dataset_name(Path(cells[0]))] = cells[column]
    return result


def machine() -> str:
    """The machine a run trained on: its CPU, and its GPU where one is present."""
    gpu = _gpu_model()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # the cores this process may use (a container's share), not the host's count
    described = f"{cpu_model() or platform.machine()}, {cores} cores, {platform.system()}"
    return f"{gpu}; {described}" if gpu else described


# ----------------------------------------------------------------- profiling
def profile(path: Path, cache: Path, base_model: str, pair: bool) -> MetaFeatures:
    """The profiler's meta-features of ``path``, computed here by the profiler's own code (what the
    service publishes and ``metatune profile`` prints, with the same options). Cached next to the
    slice (a cache written before the label probe, without one for labelled rows, is made again)."""
    if cache.is_file():
        cached = MetaFeatures.model_validate_json(cache.read_text())
        probed_then = cached.probe_accuracy is not None or cached.n_classes < 2
        if probed_then or cached.n_examples < ProfileOptions().probe_rows:
            return cached
    features = profile_dataset(path, base_model, pair)
    cache.write_text(features.model_dump_json())
    return features


# ----------------------------------------------------------------- one run
def to_record(
    planned: PlannedRun,
    data: DataSlice,
    features: MetaFeatures,
    outcome: RunOutcome,
    settings: BuildSettings,
    licence: str | None,
) -> KbRun:
    total = max(1, outcome.total_steps)
    losses = dict(outcome.loss_history)
    curve = [
        CurvePoint(
            step=step,
            fraction=min(1.0, step / total),
            val_loss=evaluation.loss,
            metric=evaluation.accuracy,
            train_loss=losses.get(step),
        )
        for step, evaluation in outcome.evaluations
    ]
    final = outcome.evaluation
    acc = outcome.accounting
    status = RunStatus.early_stopped if outcome.early_stopped else RunStatus.completed
    return _seed_run(
        planned,
        data,
        features,
        settings,
        licence,
        status=status,
        stop_reason=outcome.stop_reason,
        metric=final.accuracy if final else None,
        val_loss=final.loss if final else None,
        curve=curve,
        steps=outcome.step,
        planned_steps=outcome.total_steps,
        tokens=acc.tokens_seen,
        tokens_with_padding=acc.tokens_with_padding,
        wall_seconds=acc.wall_seconds,
        train_seconds=outcome.train_seconds,
        gpu_hours=acc.gpu_hours if outcome.device.startswith("cuda") else 0.0,
        energy_wh=acc.energy_wh,
        emissions_g=None,
        hardware=Hardware(
            device=outcome.device.split(":")[0],
            gpu_model=_gpu_model() if outcome.device.startswith("cuda") else None,
            gpu_count=1 if outcome.device.startswith("cuda") else 0,
            cpu_model=cpu_model(),
            precision=outcome.precision,
        ),
        datacenter=None,
    )


def _seed_run(
    planned: PlannedRun,
    data: DataSlice,
    features: MetaFeatures,
    settings: BuildSettings,
    licence: str | None,
    **outcome: Any,
) -> KbRun:
    """A seed row: the planned run on its data slice, with what its ``outcome`` fills in."""
    return KbRun(
        run_id=planned.run_id,
        dataset=DatasetInfo(
            name=data.name,
            features=features,
            licence=licence,
            n_train=data.n_train,
            n_val=data.n_val,
        ),
        base_model=settings.base_model,
        task=data.task,
        config=planned.config.model_dump(mode="json"),
        metric_name="accuracy",
        majority_baseline=data.majority_baseline,
        seed=planned.seed,
        provenance=Provenance(
            source="seed-kb",
            code_version=code_version(),
            machine=machine(),
            created_at=datetime.now(UTC),
        ),
        **outcome,
    )


@functools.cache
def _gpu_model() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def failed_record(
    planned: PlannedRun,
    data: DataSlice,
    features: MetaFeatures,
    settings: BuildSettings,
    error: TrainingError,
    licence: str | None,
) -> KbRun:
    return _seed_run(
        planned,
        data,
        features,
        settings,
        licence,
        status=RunStatus.failed,
        stop_reason=f"{type(error).__name__}: {error}"[:500],
    )


# ----------------------------------------------------------------- the build
def discover(settings: BuildSettings) -> list[Path]:
    if settings.datasets:
        files = []
        for name in settings.datasets:
            matches = [settings.data_dir / f"{name}{ext}" for ext in (".jsonl.gz", ".jsonl")]
            found = next((m for m in matches if m.is_file()), None)
            if found is None:
                raise BuildError(
                    f"dataset {name!r} not found in {settings.data_dir} (looked for {name}.jsonl[.gz])"
                )
            files.append(found)
        return files
    files = sorted(settings.data_dir.glob("*.jsonl.gz")) + sorted(settings.data_dir.glob("*.jsonl"))
    files = [f for f in files if not dataset_name(f).startswith("lm_")]
    if not files:
        raise BuildError(f"no *.jsonl[.gz] classification datasets in {settings.data_dir}")
    return files


def header(settings: BuildSettings, names: list[str], licence_of: dict[str, str]) -> KbFileHeader:
    return KbFileHeader(
        provenance={
            "source": "seed-kb",
            "machine": machine(),
            "versions": {
                name: _version(name)
                for name in ("torch", "transformers", "peft", "metatune-shared")
            },
            "code_version": code_version(),
            "base_model": settings.base_model,
            "budget": {
                "train_rows": settings.train_rows,
                "val_rows": settings.val_rows,
                "epochs": settings.epochs,
                "max_steps": None if settings.epochs is not None else settings.max_steps,
                "evaluations": settings.evaluations,
                "max_seq_length": settings.max_seq_length,
                "precision": settings.precision,
            },
            "design": {
                "kind": "scrambled Sobol over metatune.knowledge.space: a shared design, "
                "and per dataset its own (seeded by its name)",
                "configs": settings.configs,
                "local_configs": settings.local_configs,
                "id_prefix": settings.id_prefix,
                "design_seed": settings.design_seed,
                "seed": settings.seed,
                "repeats": {
                    "configs": settings.repeat_configs,
                    "seeds": list(settings.repeat_seeds),
                    "datasets": settings.repeat_datasets,
                },
            },
            "datasets": {name: {"licence": licence_of.get(name)} for name in names},
            "note": "meta-features and results only; no dataset text"
            + (f"; {settings.note}" if settings.note else ""),
        }
    )


def planned_runs(settings: BuildSettings, names: list[str]) -> list[PlannedRun]:
    """Every run of the build's design on ``names``, in the order the build trains them."""
    budget = (
        Budget(max_steps=None, epochs=settings.epochs, max_seq_length=settings.max_seq_length)
        if settings.epochs is not None
        else Budget(max_steps=settings.max_steps, max_seq_length=settings.max_seq_length)
    )
    return plan_runs(
        names,
        configs=settings.configs,
        local_configs=settings.local_configs,
        budget=budget,
        repeat_configs=settings.repeat_configs,
        repeat_seeds=settings.repeat_seeds,
        repeat_datasets=settings.repeat_datasets,
        design_seed=settings.design_seed,
        seed=settings.seed,
        id_prefix=settings.id_prefix,
    )


def prepare(settings: BuildSettings, source: Path) -> tuple[DataSlice, MetaFeatures]:
    """The dataset's slice and its meta-features (both cached in the work folder)."""
    data = make_slice(
        source,
        settings.work_dir / "slices",
        train_rows=settings.train_rows,
        val_rows=settings.val_rows,
    )
    features = profile(
        data.train_path,
        settings.work_dir / "slices" / f"{data.name}.profile.json",
        settings.base_model,
        pair=data.task.value == "pair_classification",
    )
    return data, features


def _start_file(settings: BuildSettings, names: list[str]) -> None:
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    if not settings.out.exists() or settings.out.stat().st_size == 0:
        header_line = header(settings, names, licences(settings.data_dir)).model_dump_json()
        append_line(settings.out, header_line)


def build(
    settings: BuildSettings,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> BuildReport:
    """Train every planned run not yet in ``settings.out``; returns what was done."""
    files = discover(settings)
    names = [dataset_name(f) for f in files]
    k, n = settings.shard
    planned = [run for index, run in enumerate(planned_runs(settings, names)) if index % n == k]
    existing = read_existing(settings.out)
    for other in settings.done_files:
        existing.update(read_existing(other))
    licence_of = licences(settings.data_dir)
    _start_file(settings, names)
    report = BuildReport(total=len(planned), done_before=sum(p.run_id in existing for p in planned))
    slices: dict[str, DataSlice] = {}
    features: dict[str, MetaFeatures] = {}
    by_name = dict(zip(names, files, strict=True))
    done = report.done_before
    for run in _todo(planned, existing):
        if settings.limit is not None and report.trained + report.failed >= settings.limit:
            break
        if settings.deadline is not None and time.time() >= settings.deadline:
            break
        if run.dataset in report.skipped_datasets:
            continue
        if run.dataset not in slices:
            try:
                slices[run.dataset], features[run.dataset] = prepare(settings, by_name[run.dataset])
            except (ValueError, BuildError) as exc:
                report.skipped_datasets[run.dataset] = str(exc)
                continue
        data = slices[run.dataset]
        if on_progress:
            on_progress(done, report.total, run.run_id)
        request = training_request(settings, data, run)
        licence = licence_of.get(run.dataset)
        try:
            outcome = run_training(request, site=Site(idle_seconds=settings.idle_seconds))
            record = to_record(run, data, features[run.dataset], outcome, settings, licence)
            report.trained += 1
        except TrainingError as exc:
            record = failed_record(run, data, features[run.dataset], settings, exc, licence)
            report.failed += 1
        append_line(settings.out, record.model_dump_json())
        done += 1
    if on_progress:
        on_progress(done, report.total, "")
    return report


def build_parallel(
    settings: BuildSettings,
    workers: int,
    on_progress: Callable[[int, int, str], None] | None = None,
    poll_s: float = 2.0,
) -> BuildReport:
    """Train the build in ``workers`` processes at once, then merge their files into ``settings.out``.

    For a machine that one run leaves idle (a GPU a small model cannot fill, many cores): each
    process trains many runs, its shard of the plan (``k/workers``), into its own file in
    ``work_dir/parts``; slices and profiles are made once, before the processes start. A killed
    parallel build resumes: the parts are merged first and count as done."""
    if workers <= 1:
        return build(settings, on_progress)
    if settings.shard != (0, 1):
        raise BuildError("a parallel build shards the plan itself: leave the shard at 0/1")
    files = discover(settings)
    names = [dataset_name(f) for f in files]
    parts_dir = settings.work_dir / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    _start_file(settings, names)
    merge_files(settings.out, sorted(p for p in parts_dir.glob("part-*.jsonl") if p.stat().st_size))
    planned = planned_runs(settings, names)
    existing = read_existing(settings.out)
    for other in settings.done_files:
        existing.update(read_existing(other))
    report = BuildReport(total=len(planned), done_before=sum(p.run_id in existing for p in planned))
    if report.done_before == report.total:  # a finished build started again: no process to start
        return report
    for path in files:  # the workers would otherwise write the same slice at once
        try:
            prepare(settings, path)
        except (ValueError, BuildError) as exc:
            report.skipped_datasets[dataset_name(path)] = str(exc)
    shards = [
        dataclasses.replace(
            settings,
            out=parts_dir / f"part-{k:02d}-of-{workers:02d}.jsonl",
            shard=(k, workers),
            done_files=(settings.out, *settings.done_files),
            limit=None if settings.limit is None else -(-settings.limit // workers),
        )
        for k in range(workers)
    ]
    context = multiprocessing.get_context("spawn")  # a CUDA context cannot cross a fork
    with ProcessPoolExecutor(  # a killed build leaves no worker training for no one
        max_workers=workers, mp_context=context, initializer=die_with_parent
    ) as pool:
        futures = [pool.submit(build, shard) for shard in shards]
        while not all(future.done() for future in futures):
            if on_progress:
                fresh = sum(_runs_in(shard.out) for shard in shards)
                on_progress(report.done_before + fresh, report.total, "")
            wait(futures, timeout=poll_s)
        results = [future.result() for future in futures]  # a worker's error is raised here
    merge_files(settings.out, [shard.out for shard in shards])
    report.trained = sum(result.trained for result in results)
    report.failed = sum(result.failed for result in results)
    for result in results:
        report.skipped_datasets.update(result.skipped_datasets)
    if on_progress:
        on_progress(report.done_before + report.trained + report.failed, report.total, "")
    return report


def _runs_in(path: Path) -> int:
    """Complete run lines in a build file (its header not counted); 0 before it exists."""
    try:
        with path.open("rb") as handle:
            return max(0, sum(1 for line in handle if line.endswith(b"\n")) - 1)
    except FileNotFoundError:
        return 0


def training_request(settings: BuildSettings, data: DataSlice, run: PlannedRun) -> TrainingRequest:
    """The run's training request; its evaluations at fixed fractions of its own steps."""
    request = TrainingRequest(
        dataset=data.path,
        task=data.task,
        base_model=settings.base_model,
        text_column="text",
        text_pair_column="text_pair" if data.task.value == "pair_classification" else None,
        label_column="label",
        config=run.config,
        options=TrainOptions(
            device=settings.device,
            precision=settings.precision,
            early_stopping=False,
            max_eval_examples=settings.val_rows,
            cache_dir=settings.work_dir / "tokens",
        ),
    )
    steps = total_steps_for(request, data.n_train)
    every = max(1, steps // settings.evaluations)
    return request.model_copy(
        update={"options": request.options.model_copy(update={"eval_every": every})}
    )


def _todo(planned: list[PlannedRun], existing: dict[str, KbRun]) -> Iterator[PlannedRun]:
    return (run for run in planned if run.run_id not in existing)
