"""``metatune profile FILE``: the same profile the service publishes, as a table or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from metatune.contracts import DatasetFormat, TaskType
from metatune.models import EMBEDDED_MODEL

from .domain.columns import ColumnRequest
from .domain.errors import ProfileError

if TYPE_CHECKING:
    from .domain.profile import ProfileResult


def _table(result: ProfileResult) -> Table:
    table = Table(
        title=f"profile ({result.format.value}, text={result.columns.text!r}, "
        f"pair={result.columns.text_pair!r}, label={result.columns.label!r})"
    )
    table.add_column("feature")
    table.add_column("value", justify="right")
    for name, value in result.features.model_dump().items():
        if isinstance(value, dict):
            for key, item in value.items():
                table.add_row(f"{name}.{key}", f"{item:.4g}")
        elif isinstance(value, float):
            table.add_row(name, f"{value:.4g}")
        else:
            table.add_row(name, str(value))
    table.add_row("rows_skipped", f"{result.rows_skipped} {result.skip_reasons or ''}")
    return table


def profile(
    file: Annotated[
        Path, typer.Argument(help="CSV, JSON-lines, Parquet or text file (may be .gz)")
    ],
    base_model: Annotated[
        str, typer.Option(help="embedded alias, HF model directory or hub id")
    ] = EMBEDDED_MODEL,
    text_column: Annotated[str | None, typer.Option(help="default: detected")] = None,
    text_pair_column: Annotated[str | None, typer.Option(help="second text of a pair task")] = None,
    label_column: Annotated[str | None, typer.Option(help="default: detected")] = None,
    task: Annotated[TaskType | None, typer.Option(help="default: from the columns")] = None,
    format: Annotated[
        DatasetFormat | None, typer.Option(help="default: from the name and content")
    ] = None,
    sample_size: Annotated[int, typer.Option(help="rows sampled for tokenizer features")] = 4096,
    seed: Annotated[int, typer.Option(help="seed of the row sample")] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the ProfileResult as JSON")
    ] = False,
) -> None:
    """Profile a dataset file into MetaTune meta-features."""
    from .adapters.block_pool import block_map
    from .adapters.files import profile_file  # transformers: only when profiling
    from .domain.profile import ProfileOptions
    from .settings import ProfilerSettings

    options = ProfileOptions(
        base_model=base_model,
        format=format,
        sample_size=sample_size,
        seed=seed,
        columns=ColumnRequest(
            text=text_column, text_pair=text_pair_column, label=label_column, task=task
        ),
    )
    try:
        with Progress(
            SpinnerColumn(),
            TextColumn("profiling {task.fields[name]}"),
            TextColumn("{task.completed:,} rows"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
            disable=as_json,
        ) as bar:
            bar_task = bar.add_task("profile", total=None, name=file.name)
            result = profile_file(
                file,
                options,
                on_rows=lambda rows: bar.update(bar_task, completed=rows),
                map_blocks=block_map(ProfilerSettings().profiler_workers, file),
            )
    except ProfileError as exc:
        where = f" (row {exc.row})" if exc.row else ""
        Console(stderr=True).print(f"[red]{exc.code}[/red]{where}: {exc.message}")
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        Console().print(_table(result))
