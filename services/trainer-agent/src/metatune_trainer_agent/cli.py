"""``metatune train FILE``: one fine-tuning run outside the platform, through the agent's own code path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress
from rich.table import Table

from metatune.contracts import DatasetFormat, LoraConfig, RunMetrics, TaskType
from metatune.models import EMBEDDED_MODEL
from metatune.settings import get_settings

from .domain.errors import TrainingError
from .domain.request import TrainingRequest, TrainOptions, apply_overrides

if TYPE_CHECKING:  # torch and transformers load only when a run starts: the metatune CLI stays fast
    from .domain.run import Progress, RunOutcome


class TrainReport(BaseModel):
    """What ``metatune train --json`` prints."""

    status: str
    steps: int
    total_steps: int
    early_stopped: bool
    initial_val_loss: float | None
    train_loss: float | None
    metrics: RunMetrics | None
    tokens: int
    tokens_with_padding: int
    padding_overhead: float  # tokens with padding per useful token
    energy_wh: float
    power_source: str | None
    idle_power_w: float | None
    gpu_hours: float
    g_per_kwh: (
        float | None
    )  # the carbon intensity priced in (--g-per-kwh); None: emissions unpriced
    pue: float
    emissions_g: (
        float | None
    )  # energy x PUE x intensity; None when no intensity was given (never 0 by default)
    seconds: float  # wall time of the whole run: loading, tokenising, evaluating, training
    train_seconds: float  # time inside optimizer steps
    tokens_per_second: float  # useful tokens per wall second (what the run cost end to end)
    step_tokens_per_second: (
        float  # useful tokens per second inside optimizer steps (the training speed)
    )
    device: str
    precision: str
    micro_batch: int
    grad_accum: int
    trainable_parameters: int
    tokenization_cache_hit: bool
    config: LoraConfig


def report(
    outcome: RunOutcome, config: LoraConfig, *, g_per_kwh: float | None = None, pue: float = 1.0
) -> TrainReport:
    acc = outcome.accounting
    metrics = None
    if outcome.evaluation is not None:
        e = outcome.evaluation
        metrics = RunMetrics(
            val_loss=e.loss, accuracy=e.accuracy, macro_f1=e.macro_f1, perplexity=e.perplexity
        )
    return TrainReport(
        status=outcome.status,
        steps=outcome.step,
        total_steps=outcome.total_steps,
        early_stopped=outcome.early_stopped,
        initial_val_loss=outcome.initial_val_loss,
        train_loss=outcome.train_loss,
        metrics=metrics,
        tokens=acc.tokens_seen,
        tokens_with_padding=acc.tokens_with_padding,
        padding_overhead=acc.tokens_with_padding / max(acc.tokens_seen, 1),
        energy_wh=acc.energy_wh,
        power_source=acc.power_source,
        idle_power_w=acc.idle_power_w,
        gpu_hours=acc.gpu_hours if outcome.device.startswith("cuda") else 0.0,
        g_per_kwh=g_per_kwh,
        pue=pue,
        emissions_g=acc.emissions_g if g_per_kwh is not None else None,
        seconds=acc.wall_seconds,
        train_seconds=outcome.train_seconds,
        tokens_per_second=acc.tokens_seen / max(acc.wall_seconds, 1e-9),
        step_tokens_per_second=acc.tokens_seen / max(outcome.train_seconds, 1e-9),
        device=outcome.device,
        precision=outcome.precision,
        micro_batch=outcome.micro_batch,
        grad_accum=outcome.grad_accum,
        trainable_parameters=outcome.trainable_parameters,
        tokenization_cache_hit=outcome.cache_hit,
        config=config,
    )


def _parse_sets(values: list[str]) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"--set {item!r}: use KEY=VALUE, e.g. --set rank=8")
        pairs[key.strip()] = value.strip()
    return pairs


@contextmanager
def _progress(console: Console, *, enabled: bool) -> Iterator[Callable[[Progress], None] | None]:
    """A Rich progress bar over the run's optimizer steps, with ETA (on stderr; off for --json)."""
    if not enabled:
        yield None
        return
    columns = (
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[loss]}"),
    )
    with RichProgress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("train", total=None, loss="")

        def on_progress(progress: Progress) -> None:
            loss = f"loss {progress.train_loss:.3f}" if progress.train_loss is not None else ""
            bar.update(task, completed=progress.step, total=progress.total_steps, loss=loss)

        yield on_progress


def _table(r: TrainReport) -> Table:
    table = Table(
        title=f"metatune train: {r.status} after {r.steps}/{r.total_steps} steps"
        + (" (early stop)" if r.early_stopped else "")
    )
    table.add_column("")
    table.add_column("value", justify="right")
    rows: list[tuple[str, str]] = []
    if r.metrics:
        rows += [
            (
                "val loss",
                f"{r.metrics.val_loss:.4f} (start {r.initial_val_loss:.4f})"
                if r.initial_val_loss is not None
                else f"{r.metrics.val_loss:.4f}",
            )
        ]
        for name in ("accuracy", "macro_f1", "perplexity"):
            value = getattr(r.metrics, name)
            if value is not None:
                rows.append((name, f"{value:.4f}"))
    rows += [
        ("train loss (last step)", f"{r.train_loss:.4f}" if r.train_loss is not None else "-"),
        (
            "tokens (useful / with padding)",
            f"{r.tokens:,} / {r.tokens_with_padding:,} ({r.padding_overhead:.2f}x)",
        ),
        (
            "energy above idle",
            f"{r.energy_wh:.4f} Wh ({r.power_source}, idle {r.idle_power_w or 0:.1f} W)",
        ),
        (
            "emissions",
            f"{r.emissions_g:.4f} gCO2eq at {r.g_per_kwh:g} g/kWh x PUE {r.pue:g}"
            if r.emissions_g is not None
            else "unpriced (no carbon intensity: --g-per-kwh)",
        ),
        ("GPU-hours", f"{r.gpu_hours:.6f}"),
        ("time (wall / in steps)", f"{r.seconds:.1f} s / {r.train_seconds:.1f} s"),
        (
            "useful tokens/s (wall / in steps)",
            f"{r.tokens_per_second:,.0f} / {r.step_tokens_per_second:,.0f}",
        ),
        ("device / precision", f"{r.device} / {r.precision}"),
        ("micro-batch x accumulation", f"{r.micro_batch} x {r.grad_accum}"),
        ("trainable parameters", f"{r.trainable_parameters:,}"),
        ("tokenization cache", "hit" if r.tokenization_cache_hit else "miss"),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def train(
    file: Annotated[
        Path, typer.Argument(help="CSV, JSON-lines, Parquet or text file (may be .gz)")
    ],
    base_model: Annotated[
        str, typer.Option(help="embedded alias, HF model directory or hub id")
    ] = EMBEDDED_MODEL,
    task: Annotated[
        TaskType, typer.Option(help="classification | pair_classification | causal_lm")
    ] = TaskType.classification,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="KEY=VALUE of the LoRA config or a training option, e.g. rank=8 lr=3e-4 precision=bf16",
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(help="optimizer steps (default: the config's epochs)")
    ] = None,
    text_column: Annotated[str | None, typer.Option(help="default: detected")] = None,
    text_pair_column: Annotated[str | None, typer.Option(help="second text of a pair task")] = None,
    label_column: Annotated[str | None, typer.Option(help="default: detected")] = None,
    format: Annotated[
        DatasetFormat | None, typer.Option(help="default: from the name and content")
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:1 ...")] = "auto",
    devices: Annotated[
        int,
        typer.Option(
            min=1, max=64, help="processes, one per device (>1: torchrun + DDP; gloo on CPU)"
        ),
    ] = 1,
    adapter_out: Annotated[
        Path | None, typer.Option(help="write the trained adapter archive (.tar) here")
    ] = None,
    g_per_kwh: Annotated[
        float | None,
        typer.Option(min=0, help="carbon intensity to price the energy at, gCO2eq/kWh"),
    ] = None,
    pue: Annotated[float, typer.Option(min=1.0, help="datacenter power usage effectiveness")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Fine-tune a LoRA adapter on FILE and print metrics, tokens, energy and time."""
    overrides = _overrides(set_ or [], max_steps)
    settings = get_settings()
    err = Console(stderr=True)
    try:
        config, options = apply_overrides(
            LoraConfig(),
            TrainOptions(
                device=device, cache_dir=settings.resolved_data_dir() / "agent" / "cache" / "tokens"
            ),
            overrides,
        )
        request = TrainingRequest(
            dataset=file,
            dataset_format=format,
            task=task,
            base_model=base_model,
            text_column=text_column,
            text_pair_column=text_pair_column,
            label_column=label_column,
            config=config,
            options=options,
        )
        with _progress(err, enabled=not as_json) as on_progress:
            outcome = _run(request, devices, pue, g_per_kwh, on_progress)
    except TrainingError as exc:
        err.print(f"[red]{exc.reason.value}[/red]: {exc}")
        raise typer.Exit(2) from exc
    if adapter_out is not None and outcome.adapter is not None:
        adapter_out.write_bytes(outcome.adapter)
    _print_report(report(outcome, config, g_per_kwh=g_per_kwh, pue=pue), as_json=as_json)


def _overrides(sets: list[str], max_steps: int | None) -> dict[str, str]:
    """The ``--set KEY=VALUE`` pairs, with ``--max-steps`` as one more."""
    overrides = _parse_sets(sets)
    if max_steps is not None:
        overrides["max_steps"] = str(max_steps)
    return overrides


def _run(
    request: TrainingRequest,
    devices: int,
    pue: float,
    g_per_kwh: float | None,
    on_progress: Callable[[Progress], None] | None,
) -> RunOutcome:
    """Train on ``devices`` devices (one: in this process; more: under torchrun), in a
    datacenter of ``pue``, its energy priced at ``g_per_kwh`` every hour."""
    from metatune.clock import RealClock

    from .adapters.multi_device import MultiDeviceRun
    from .adapters.training import run_training
    from .domain.run import RunHooks, Site

    train = run_training if devices == 1 else MultiDeviceRun(devices)
    return train(
        request,
        site=Site(pue=pue, gpus=devices),
        clock=RealClock(),
        intensity=(lambda hour: g_per_kwh),
        hooks=RunHooks(on_progress=on_progress),
    )


def _print_report(result: TrainReport, *, as_json: bool) -> None:
    """The report as a table, or with --json as JSON."""
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        Console().print(_table(result))
