"""``metatune results STUDY``: each trial's configuration, metrics, energy and emissions.

Emissions come twice: as the agent charged them while the run trained (each hour at the latest
forecast's intensity) and *realised* (:mod:`metatune_cli.client.emissions`): each observed hour
re-priced at its grid's observed intensity, the others still at the forecast's.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from metatune.display import beside_baseline, trial_label

from .calls import client
from .output import print_json

console = Console()


def results(
    study: str = typer.Argument(
        ..., help="Study id, or a unique prefix of it (as `study list` shows)"
    ),
    raw: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """STUDY's trials: configuration, metrics, energy (Wh), emissions as charged at the forecast
    intensity and realised (gCO2eq, observed hours re-priced)."""
    with client() as metatune:
        trials = [t.model_dump(mode="json") for t in metatune.results(study)]
    if raw:
        print_json(trials)
        return
    print_results(trials)


def print_results(trials: list[dict[str, Any]]) -> None:
    """The results table ``metatune results`` prints (each trial as its JSON)."""
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
        "gCO2eq forecast",
        "gCO2eq realised",
        "hours observed",
    )
    for t in trials:
        config, metrics = t["config"] or {}, t["metrics"] or {}
        table.add_row(
            *(
                _cell(v)
                for v in (
                    trial_label(t["trial_index"]),
                    t["job_id"],
                    t["status"],
                    config.get("rank"),
                    config.get("alpha"),
                    config.get("learning_rate"),
                    config.get("batch_size"),
                    metrics.get("val_loss"),
                    beside_baseline(
                        metrics.get("accuracy"), t["majority_baseline"], t["chance_baseline"]
                    ),
                    t["energy_wh"],
                    t["emissions_g"],
                    t["realised_emissions_g"],
                    None
                    if t["realised_hours"] is None
                    else f"{t['realised_hours']}/{t['realised_hours'] + t['forecast_priced_hours']}",
                )
            )
        )
    console.print(table if trials else "no trials requested yet")
    if any(t["forecast_priced_hours"] for t in trials):
        console.print(
            "hours not observed yet are priced at the forecast intensity in 'gCO2eq realised'",
            highlight=False,
        )


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
