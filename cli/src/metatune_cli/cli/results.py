"""``metatune results STUDY``: each trial's configuration, metrics, energy and emissions.

Emissions come twice: as the agent charged them while the run trained (each hour at the latest
forecast's intensity) and *realised* (:mod:`metatune_cli.client.emissions`): each observed hour
re-priced at its grid's observed intensity, the others still at the forecast's.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from metatune.display import beside_baseline, trial_label
from metatune.units import energy, mass

from ..tables import Column, render, short_id
from .calls import client
from .output import JSON_FLAG, STUDY_ARGUMENT, WIDE_FLAG, print_json

console = Console()


def results(
    study: str = STUDY_ARGUMENT,
    raw: bool = JSON_FLAG,
    wide: bool = WIDE_FLAG,
) -> None:
    """STUDY's trials: configuration, metrics, energy (Wh), emissions as charged at the forecast
    intensity and realised (gCO2eq, observed hours re-priced)."""
    with client() as metatune:
        trials = [t.model_dump(mode="json") for t in metatune.results(study)]
    if raw:
        print_json(trials)
        return
    print_results(trials, wide=wide)


COLUMNS = (
    Column("trial"),
    Column("status"),
    Column("rank", wide_only=True, justify="right"),
    Column("alpha", wide_only=True, justify="right"),
    Column("lr", wide_only=True, justify="right"),
    Column("batch", wide_only=True, justify="right"),
    Column("val loss", wide_only=True, justify="right"),
    Column("accuracy"),
    Column("energy", justify="right"),
    Column("CO2eq as charged", wide_only=True, justify="right"),
    Column("CO2eq realised", justify="right", compact_header="CO2eq"),
    Column("hours observed", wide_only=True, justify="right"),
    Column("job"),
)


def print_results(trials: list[dict[str, Any]], wide: bool = False) -> None:
    """The results table ``metatune results`` prints (each trial as its JSON)."""
    rows = []
    for t in trials:
        config, metrics = t["config"] or {}, t["metrics"] or {}
        rows.append(
            [
                trial_label(t["trial_index"]),
                t["status"],
                *(
                    _cell(v)
                    for v in (
                        config.get("rank"),
                        config.get("alpha"),
                        config.get("learning_rate"),
                        config.get("batch_size"),
                        metrics.get("val_loss"),
                    )
                ),
                beside_baseline(
                    metrics.get("accuracy"), t["majority_baseline"], t["chance_baseline"]
                ),
                energy(t["energy_wh"]),
                mass(t["emissions_g"]),
                mass(t["realised_emissions_g"]),
                "-"
                if t["realised_hours"] is None
                else f"{t['realised_hours']}/{t['realised_hours'] + t['forecast_priced_hours']}",
                short_id(t["job_id"]),
            ]
        )
    if not trials:
        console.print("no trials requested yet")
        return
    render(console, COLUMNS, rows, wide=wide)
    if any(t["forecast_priced_hours"] for t in trials):
        console.print(
            "CO2eq realised: each hour the grid has observed at its observed intensity, the hours "
            "not observed yet at the forecast intensity, as charged",
            highlight=False,
        )


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
