"""``metatune results STUDY``: each trial's configuration, metrics, energy and emissions."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from ..settings import get_settings
from .study import find_study, print_json

console = Console()


def results(
    study: str = typer.Argument(..., help="Study id, as `metatune submit` printed it"),
    raw: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """STUDY's trials: configuration, metrics, energy (Wh) and emissions (gCO2eq)."""
    trials = [t.summary() for t in find_study(get_settings(), study).ordered_trials()]
    if raw:
        print_json(trials)
        return
    table = Table(
        "trial",
        "job",
        "status",
        "rank",
        "alpha",
        "lr",
        "batch",
        "val loss",
        "accuracy",
        "energy Wh",
        "gCO2eq",
    )
    for t in trials:
        config, metrics = t["config"] or {}, t["metrics"] or {}
        table.add_row(
            *(
                _cell(v)
                for v in (
                    t["trial_index"],
                    t["job_id"],
                    t["status"],
                    config.get("rank"),
                    config.get("alpha"),
                    config.get("learning_rate"),
                    config.get("batch_size"),
                    metrics.get("val_loss"),
                    metrics.get("accuracy"),
                    t["energy_wh"],
                    t["emissions_g"],
                )
            )
        )
    console.print(table if trials else "no trials requested yet")


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
