"""``metatune kb probe``: give a knowledge-base file built before the label probe its datasets' probes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from metatune_cli.cli.output import JSON_HELP, print_json


def probe(
    files: Annotated[
        list[Path], typer.Argument(help="knowledge-base files to fill (rewritten in place)")
    ],
    data: Annotated[
        Path,
        typer.Option(
            help="folder of the datasets the runs name (<name>.jsonl[.gz], scripts/kb-data)"
        ),
    ],
    again: Annotated[
        bool, typer.Option("--again", help="measure datasets that have a probe too")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Profile each dataset FILES name from DATA and write its label probe (probe_accuracy) into its runs."""
    from ..adapters.kb_file import BuildError
    from ..adapters.probes import fill_probes

    err = Console(stderr=True)
    measured: dict[str, dict[str, float | None]] = {}
    for path in files:
        try:
            measured[str(path)] = fill_probes(path, data, again=again)
        except BuildError as exc:
            err.print(f"[red]kb probe:[/red] {path}: {exc}")
            raise typer.Exit(2) from exc
        err.print(f"{path}: {len(measured[str(path)])} datasets probed")
    if as_json:
        print_json(measured)
