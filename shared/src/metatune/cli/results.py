"""``metatune results STUDY``: each trial's configuration, metrics, energy and emissions.

Emissions come twice: as the agent charged them while the run trained (each hour at the latest
forecast's intensity) and *realised*: each hour the grid region has since observed priced at its
observed (average, location-based) intensity, read from the observed hours the forecasts carry;
the hours not observed yet keep the forecast price and are counted as such.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from .. import subjects
from ..contracts import CarbonForecast, RunAccounting
from ..display import beside_baseline, trial_label
from ..errors import BusUnavailable
from ..registry import load_registry
from ..settings import Settings, get_settings
from .connect import bus, unavailable
from .eventlog import read_log
from .studies import Study
from .study import find_study, print_json

console = Console()
Observed = dict[tuple[str, datetime], tuple[datetime, float]]  # (region, hour) -> (issued, g/kWh)


def results(
    study: str = typer.Argument(
        ..., help="Study id, or a unique prefix of it (as `study list` shows)"
    ),
    raw: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """STUDY's trials: configuration, metrics, energy (Wh), emissions as charged at the forecast
    intensity and realised (gCO2eq, observed hours re-priced)."""
    settings = get_settings()
    trials = trial_results(settings, find_study(settings, study))
    if raw:
        print_json(trials)
        return
    print_results(trials)


def trial_results(settings: Settings, study: Study) -> list[dict[str, Any]]:
    """Each trial's summary with its emissions as charged and as realised (``results --json``)."""
    found = study.ordered_trials()
    region_of = {dc.name: dc.region for dc in load_registry(settings.registry_path).datacenters}
    accountings = [
        t.completed.accounting if t.completed else t.failed.accounting if t.failed else None
        for t in found
    ]
    regions = {
        region_of[h.datacenter]
        for a in accountings
        if a is not None
        for h in a.hours
        if h.datacenter in region_of
    }
    observed = load_observed(settings, regions)
    trials: list[dict[str, Any]] = []
    for trial, accounting in zip(found, accountings, strict=True):
        summary = trial.summary()
        summary |= realised(accounting, region_of, observed, summary["datacenter"])
        trials.append(summary)
    return trials


def print_results(trials: list[dict[str, Any]]) -> None:
    """The results table ``metatune results`` prints."""
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
                    beside_baseline(metrics.get("accuracy"), t["majority_baseline"]),
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


def load_observed(settings: Settings, regions: set[str]) -> Observed:
    """The observed (average) intensity of each region-hour the forecasts of ``regions`` carry,
    the latest issue's report of an hour winning."""
    if not regions:
        return {}

    async def run() -> Observed:
        async with bus(settings) as nc:
            logged = await read_log(
                nc.jetstream(),
                settings.stream_name,
                {subjects.forecasts(region): CarbonForecast for region in sorted(regions)},
            )
        out: Observed = {}
        for item in logged:
            event = item.event
            if not isinstance(event, CarbonForecast) or event.observed is None:
                continue
            if event.observed.signal != "average":
                continue  # a marginal signal is no location-based price
            for h in event.observed.hours:
                key = (event.region, h.hour)
                if key not in out or out[key][0] <= event.issued_at:
                    out[key] = (event.issued_at, h.g_per_kwh)
        return out

    try:
        return asyncio.run(run())
    except BusUnavailable as exc:
        raise unavailable(exc) from None


def realised(
    accounting: RunAccounting | None,
    region_of: dict[str, str],
    observed: Observed,
    datacenter: str | None,
) -> dict[str, Any]:
    """The run's emissions with each observed hour at its realised intensity (the others at the
    forecast's); None where an hour has neither."""
    if accounting is None:
        return {"realised_emissions_g": None, "realised_hours": None, "forecast_priced_hours": None}
    grams: float | None = 0.0
    realised_hours = forecast_hours = 0
    for h in accounting.hours:
        region = region_of.get(h.datacenter or datacenter or "")
        found = observed.get((region, h.hour)) if region else None
        g = found[1] if found is not None else h.g_per_kwh
        if found is not None:
            realised_hours += 1
        elif h.g_per_kwh is not None:
            forecast_hours += 1
        grams = None if g is None or grams is None else grams + h.energy_wh / 1000 * h.pue * g
    return {
        "realised_emissions_g": grams,
        "realised_hours": realised_hours,
        "forecast_priced_hours": forecast_hours,
    }


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
