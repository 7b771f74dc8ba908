"""``metatune kb fit-stopper``: the trainer-agent's learning-curve stopper, fitted from KB curves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from metatune_cli.cli.output import JSON_HELP, print_json


def fit_stopper(
    kb: Annotated[
        Path,
        typer.Option(help="knowledge-base file (.jsonl[.gz]) whose curves train the predictor"),
    ],
    out: Annotated[
        Path,
        typer.Option(help="model file to write (JSON); the agent ships data/curve_stopper.json"),
    ],
    metric: Annotated[str, typer.Option(help="the curve metric to predict")] = "accuracy",
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Fit the learning-curve early-stop predictor (final metric with a conformal upper bound) from KB curves."""
    from metatune_trainer_agent.adapters.curve_files import save_stopper
    from metatune_trainer_agent.domain.curve_stop import CurveModelError

    from ..adapters.stopper import fit_from_kb

    console = Console(stderr=True)
    try:
        stopper = fit_from_kb(kb, metric)
    except CurveModelError as exc:
        console.print(f"[red]kb fit-stopper:[/red] {exc}")
        raise typer.Exit(2) from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    save_stopper(stopper, out)
    p = stopper.provenance
    if as_json:
        print_json(
            {
                "out": str(out),
                "kb": str(kb),
                "metric": metric,
                "runs": p["runs"],
                "datasets": p["datasets"],
                "prefix_models": len(stopper.models),
                "grid_fractions": len(stopper.grid),
            }
        )
        return
    console.print(
        f"{out}: {p['runs']} runs on {p['datasets']} datasets from {kb.name}, "
        f"prefix models for {len(stopper.models)} of {len(stopper.grid)} grid fractions"
    )
