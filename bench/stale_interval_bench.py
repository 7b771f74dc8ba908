"""How much wider a repeated day's interval must be: the width the scheduler gives the hours of a
stale or old forecast past its horizon (services/scheduler, ``domain/uncertainty.py``).

Past 168 h from its issue a forecast has no hours of its own: the forecaster's stale shift and the
scheduler both repeat its last day (leads 145-168). For every region of ``--data`` and issues every
``--stride`` hours from ``--test-from`` (the forecasts as the service serves them, recalibrated at
each issue: ``domain/served.py``), that last day's 10-90 % band is scored on the same hours of the
next ``--days`` days (k = 1 .. days repeated) and on its own hours (k = 0). Per k: the coverage,
and the factor on both offsets an 80 % interval would have needed (``recent.width_needed``), pooled
and per region; the figure the scheduler uses is the median over regions of that factor over the
same region's k = 0 factor, i.e. what repeating adds to the band's own miscalibration.

    python bench/stale_interval_bench.py --data $DATA/carbon --model MODEL [--json]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from benchkit import machine, print_json, progress, stdout_to_stderr
from rich.console import Console
from rich.table import Table

from metatune_forecaster.adapters.carbon_folder import load_folder
from metatune_forecaster.adapters.model_files import load_model, load_weather_error
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.domain.features import RegionArrays
from metatune_forecaster.domain.recent import width_needed
from metatune_forecaster.domain.samples import issue_positions
from metatune_forecaster.domain.served import served_forecasts
from metatune_forecaster.tools.train import calibrate_weather_error

HORIZON = 168
LAST_DAY = np.arange(HORIZON - 23, HORIZON + 1)  # leads 145-168, the day that is repeated


def scored(args: argparse.Namespace, console: Console) -> tuple[dict, dict]:
    """Per region and per k: (error, offset below, offset above, inside) of the repeated band."""
    series = load_folder(args.data)
    error_model = calibrate_weather_error(series) or load_weather_error(WEATHER_ERROR_PATH)
    model = load_model(args.model)
    console.print(f"model {model.version} (trained until {model.metadata.get('train_until')})")
    per_region: dict[str, dict[int, list[np.ndarray]]] = {}
    issues_of: dict[str, int] = {}
    for one in progress(series, "regions"):
        arrays = RegionArrays(one)
        issues = issue_positions(arrays, args.test_from, None, args.stride)
        issues = issues[issues + HORIZON + 24 * args.days <= len(arrays.y)]
        if not len(issues):
            continue
        served = served_forecasts(model, arrays, issues, error_model, args.seed)
        low, mid, high = served.recalibrated
        rows: dict[int, list[np.ndarray]] = {k: [] for k in range(args.days + 1)}
        for issue in np.unique(served.issue):
            sel = served.issue == issue
            order = np.argsort(served.lead[sel])
            lo, md, hi = (band[sel][order][LAST_DAY - 1] for band in (low, mid, high))
            for k in rows:
                actual = arrays.y[issue + LAST_DAY + 24 * k - 1]
                ok = np.isfinite(actual)
                rows[k].append(
                    np.stack(
                        [
                            (actual - md)[ok],
                            (lo - md)[ok],
                            (hi - md)[ok],
                            ((actual >= lo) & (actual <= hi))[ok].astype(float),
                        ]
                    )
                )
        per_region[one.name] = rows
        issues_of[one.name] = len(issues)
    return per_region, issues_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a folder laid out like $DATA/carbon")
    parser.add_argument("--model", required=True, help="the forecaster's model file")
    parser.add_argument(
        "--test-from", type=lambda s: pd.Timestamp(s, tz="UTC"), default="2023-01-01"
    )
    parser.add_argument("--stride", type=int, default=25, help="hours between issues")
    parser.add_argument("--days", type=int, default=7, help="days the last day is repeated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    console = Console(width=140, stderr=args.json)
    started = time.perf_counter()
    with stdout_to_stderr(args.json):
        per_region, issues_of = scored(args, console)
    factor = {
        region: {k: width_needed(*np.concatenate(v, axis=1)[:3]) for k, v in rows.items()}
        for region, rows in per_region.items()
    }
    days = []
    for k in range(args.days + 1):
        pooled = np.concatenate(
            [np.concatenate(rows[k], axis=1) for rows in per_region.values()], 1
        )
        days.append(
            {
                "days_repeated": k,
                "coverage": round(100 * float(pooled[3].mean()), 1),
                "width_needed": round(width_needed(*pooled[:3]), 3),
                "width_needed_median": round(float(np.median([f[k] for f in factor.values()])), 3),
                "over_own_lead_median": round(
                    float(np.median([f[k] / f[0] for f in factor.values()])), 3
                ),
            }
        )
    report = {
        "machine": machine(),
        "test_from": f"{args.test_from:%Y-%m-%d}",
        "stride_h": args.stride,
        "regions": {r: {"issues": issues_of[r], "width_needed": factor[r]} for r in factor},
        "days": days,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print_json(report)
        return
    table = Table("days repeated", "coverage %", "width needed", "median", "median / own lead")
    for day in days:
        table.add_row(*(str(v) for v in day.values()))
    console.print(table)


if __name__ == "__main__":
    main()
