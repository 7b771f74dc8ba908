"""``metatune kb build``: train the seed knowledge base (resumable, with progress and ETA)."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from metatune.models import EMBEDDED_MODEL
from metatune_cli.cli.output import JSON_HELP, print_json


def _shard(value: str) -> tuple[int, int]:
    try:
        k, n = (int(part) for part in value.split("/"))
    except ValueError:
        raise typer.BadParameter(f"--shard takes K/N, e.g. 0/2, not {value!r}") from None
    if not 0 <= k < n:
        raise typer.BadParameter(f"--shard {value}: need 0 <= K < N")
    return k, n


# long: one typer option per setting of the build (its --help), then a few lines that run it
def build(
    data: Annotated[
        Path,
        typer.Option(help="folder of *.jsonl[.gz] text datasets (text, optional text_pair, label)"),
    ],
    out: Annotated[Path, typer.Option(help="knowledge-base file to write or resume (.jsonl)")],
    datasets: Annotated[
        str | None,
        typer.Option(help="comma-separated dataset names; default: every classification file"),
    ] = None,
    configs: Annotated[
        int,
        typer.Option(min=1, help="configurations of the shared Sobol design (on every dataset)"),
    ] = 16,
    local_configs: Annotated[
        int,
        typer.Option(min=0, help="more configurations per dataset from its own Sobol design"),
    ] = 0,
    train_rows: Annotated[
        int, typer.Option(min=10, help="training rows sampled from each dataset")
    ] = 2000,
    val_rows: Annotated[
        int, typer.Option(min=10, help="validation rows sampled from each dataset")
    ] = 256,
    max_steps: Annotated[
        int, typer.Option(min=2, help="optimizer steps per run, whatever the batch size")
    ] = 80,
    epochs: Annotated[
        float | None,
        typer.Option(
            min=0.01,
            help="budget per dataset size: ceil(EPOCHS x train rows / batch size) steps, so every "
            "batch size sees the same examples (wins over --max-steps)",
        ),
    ] = None,
    evaluations: Annotated[
        int, typer.Option(min=1, help="evaluations per run, at fixed step fractions")
    ] = 8,
    max_seq_length: Annotated[int, typer.Option(min=8, help="tokens a text is cut to")] = 128,
    repeat_configs: Annotated[
        int, typer.Option(min=0, help="configurations repeated with other seeds")
    ] = 3,
    repeat_seeds: Annotated[
        str, typer.Option(help="comma-separated extra seeds for the repeats")
    ] = "14,15",
    repeat_datasets: Annotated[int, typer.Option(min=0, help="datasets the repeats run on")] = 4,
    design_seed: Annotated[int, typer.Option(help="seed of the Sobol designs")] = 0,
    base_model: Annotated[
        str, typer.Option(help="embedded alias, local HF model dir or hub id")
    ] = EMBEDDED_MODEL,
    precision: Annotated[str, typer.Option(help="auto, fp32, bf16, fp16")] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:1 ...")] = "auto",
    work_dir: Annotated[
        Path | None, typer.Option(help="slices, profiles, token cache; default: next to --out")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="train at most this many new runs, then stop")
    ] = None,
    shard: Annotated[
        str,
        typer.Option(help="K/N: train only every N-th planned run starting at K (parallel builds)"),
    ] = "0/1",
    done: Annotated[
        list[Path] | None,
        typer.Option(help="another KB file whose runs count as done (repeatable)"),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="processes training at once, each many runs of its share of the plan (a GPU "
            "that one small run leaves idle, many cores); their files are merged into --out",
        ),
    ] = 1,
    time_limit: Annotated[
        float | None,
        typer.Option(min=1, help="seconds after which no new run starts (resume later)"),
    ] = None,
    idle_seconds: Annotated[
        float, typer.Option(min=0.0, help="seconds each run measures the idle power for")
    ] = 1.0,
    id_prefix: Annotated[
        str,
        typer.Option(
            help="run ids' prefix; give each build its own, so their files load side by side"
        ),
    ] = "seed-kb",
    note: Annotated[
        str | None, typer.Option(help="a remark recorded in the file's header provenance")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Train a space-filling design of LoRA configurations on each dataset; resume where a killed build stopped."""
    from ..adapters.build import BuildError, BuildSettings, build_parallel

    settings = BuildSettings(
        data_dir=data,
        out=out,
        work_dir=work_dir or out.with_suffix(".work"),
        datasets=[d.strip() for d in datasets.split(",") if d.strip()] if datasets else None,
        configs=configs,
        local_configs=local_configs,
        train_rows=train_rows,
        val_rows=val_rows,
        max_steps=max_steps,
        epochs=epochs,
        evaluations=evaluations,
        max_seq_length=max_seq_length,
        repeat_configs=repeat_configs,
        repeat_seeds=tuple(int(s) for s in repeat_seeds.split(",") if s.strip()),
        repeat_datasets=repeat_datasets,
        design_seed=design_seed,
        base_model=base_model,
        precision=precision,
        device=device,
        limit=limit,
        shard=_shard(shard),
        done_files=tuple(done or ()),
        deadline=None if time_limit is None else time.time() + time_limit,
        idle_seconds=idle_seconds,
        id_prefix=id_prefix,
        note=note,
    )
    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("kb build", total=None)

        def on_progress(done: int, total: int, run_id: str) -> None:
            bar.update(task, completed=done, total=total, description=run_id or "kb build")

        try:
            report = build_parallel(settings, workers, on_progress=on_progress)
        except BuildError as exc:
            console.print(f"[red]kb build:[/red] {exc}")
            raise typer.Exit(2) from exc
    console.print(
        f"{report.done_before + report.trained + report.failed}/{report.total} runs in {out} "
        f"({report.trained} trained now, {report.failed} failed, {report.done_before} already there)"
    )
    for name, reason in report.skipped_datasets.items():
        console.print(f"[yellow]skipped {name}[/yellow]: {reason}")
    if as_json:
        print_json({"out": str(out), **asdict(report)})


def merge(
    out: Annotated[Path, typer.Argument(help="knowledge-base file to extend (created if absent)")],
    parts: Annotated[
        list[Path],
        typer.Argument(help="knowledge-base files whose runs are added (e.g. build shards)"),
    ],
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Add the runs of PARTS to OUT, each run once (by run id); OUT keeps its header."""
    from ..adapters.kb_file import BuildError, merge_files

    try:
        added, total = merge_files(out, parts)
    except BuildError as exc:
        Console(stderr=True).print(f"[red]kb merge:[/red] {exc}")
        raise typer.Exit(2) from exc
    if as_json:
        print_json({"out": str(out), "added": added, "total": total})
    else:
        Console(stderr=True).print(f"{added} runs added, {total} in {out}")
