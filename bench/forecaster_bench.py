"""Back-test the carbon-intensity forecaster against seasonal-naive baselines.

    python bench/forecaster_bench.py --data ../shared/data/carbon --train-until 2023-01-01 --test-from 2023-01-01
    python bench/forecaster_bench.py --data OTHER_DIR --test-from 2024-01-01 --model services/forecaster/src/metatune_forecaster/data/model.joblib

Trains on every hour before ``--train-until`` (or loads ``--model``), issues 168 h forecasts
every ``--stride`` hours whose whole horizon lies at or after ``--test-from``, and reports per
region and lead bucket (1-24, 25-96, 97-168 h): MAPE and weighted MAPE of the model, of the
seasonal-naive 24 h / 168 h and 7-day same-hour-mean baselines, the model's improvement over the
better seasonal-naive baseline, and the 10-90 % interval coverage; and the coverage by lead bucket
(1-24, 25-72, 73-168 h), all regions' hours pooled. The model is scored as served:
recalibrated at each issue on its re-forecasts of the four weeks before (domain/recent.py); the
trees alone are scored beside it in the same run, as the baseline of that layer. Observed weather
(``em_weather/``) is degraded to forecast quality; archived GFS forecasts are used as they are.
Where ``dacf/`` is present and the test period covers it, day-ahead MAPE is compared with DACF's
published forecasts on the same hours.

``--data`` is any folder laid out like ../shared/data/carbon. A ``--model`` records the hours it was
trained on (everything before its ``train_until``): a test period starting earlier is refused, or
run with a loud warning under ``--allow-overlap``. Regions without a full horizon in the test
period are listed as skipped. ``--json`` prints one object with every figure of the tables.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit import finite, print_json, progress, stdout_to_stderr
from rich.console import Console
from rich.table import Table

from metatune_forecaster.adapters.carbon_folder import load_folder
from metatune_forecaster.adapters.model_files import load_model, load_weather_error, save_model
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.domain.baselines import BASELINES
from metatune_forecaster.domain.blend import PROVIDER_WEIGHT
from metatune_forecaster.domain.evaluation import (
    COVERAGE_LEADS,
    Score,
    coverage,
    coverage_hits,
    improvement,
    mape,
)
from metatune_forecaster.domain.features import RegionArrays
from metatune_forecaster.domain.model import LEAD_BUCKETS, CarbonModel, bucket_of
from metatune_forecaster.domain.samples import issue_positions
from metatune_forecaster.domain.served import served_forecasts
from metatune_forecaster.domain.weather_error import WeatherErrorModel
from metatune_forecaster.tools.train import calibrate_weather_error, train

BUCKET_NAMES = [f"{lo}-{hi}" for lo, hi in LEAD_BUCKETS]
COVERAGE_NAMES = [f"{lo}-{hi}" for lo, hi in COVERAGE_LEADS]
NOMINAL = 80.0  # the 10-90 % interval's nominal coverage, %
TOLERANCE = 5.0  # how far from it a bucket may be, points
SEASONAL = ("naive-24h", "naive-168h")


def utc(text: str) -> pd.Timestamp:
    stamp = pd.Timestamp(text)
    return stamp if stamp.tzinfo else stamp.tz_localize("UTC")


def fmt(score: Score) -> str:
    """MAPE / WMAPE as a table cell: two decimals below 5 %, one above."""
    if score.mape < 5:
        return f"{score.mape:.2f} / {score.wmape:.2f}"
    return f"{score.mape:.1f} / {score.wmape:.1f}"


def training_overlap(model: CarbonModel, test_from: pd.Timestamp) -> str | None:
    """Why scoring ``model`` from ``test_from`` would score it on hours it was trained on (None: it would not)."""
    trained_until = model.metadata.get("train_until")
    if trained_until is None:
        return f"model {model.version} does not record its training period, so a test from {test_from:%Y-%m-%d} may overlap it"
    if test_from < utc(trained_until):
        return (
            f"model {model.version} was trained on every hour before {utc(trained_until):%Y-%m-%d %H:%M}, "
            f"the test period starts {test_from:%Y-%m-%d %H:%M}: its scores would be partly in-sample"
        )
    return None


def forecasts_at(
    model: CarbonModel,
    arrays: RegionArrays,
    issues: np.ndarray,
    error_model: WeatherErrorModel,
    seed: int,
):
    """(issue, lead, static, recalibrated) rows of the 168 h forecasts at ``issues``, in g/kWh;
    ``static`` = the trees alone, ``recalibrated`` = as served (domain/served.py)."""
    served = served_forecasts(model, arrays, issues, error_model, seed)
    return served.issue, served.lead, served.static, served.recalibrated


def evaluate(
    model: CarbonModel,
    arrays: RegionArrays,
    issues: np.ndarray,
    error_model: WeatherErrorModel,
    seed: int,
) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Rows per model lead bucket, and the interval's coverage counts per COVERAGE_LEADS bucket
    (``model``: recalibrated, ``static``: the trees alone)."""
    issue, lead, (static_low, static_mid, static_high), (low, mid, high) = forecasts_at(
        model, arrays, issues, error_model, seed
    )
    actual = arrays.y[issue + lead - 1]
    hits = {
        "model": coverage_hits(lead, low, high, actual),
        "static": coverage_hits(lead, static_low, static_high, actual),
    }
    baselines = {name: fn(arrays.y, issue, lead) for name, fn in BASELINES.items()}
    rows = []
    buckets = bucket_of(lead)
    for b, bucket in enumerate(BUCKET_NAMES):
        sel = buckets == b
        row = {
            "region": arrays.series.name,
            "bucket": bucket,
            "model": Score.of(mid[sel], actual[sel]),
        }
        row.update({name: Score.of(pred[sel], actual[sel]) for name, pred in baselines.items()})
        row["coverage"] = coverage(low[sel], high[sel], actual[sel])
        row["static"] = Score.of(static_mid[sel], actual[sel])
        row["static_coverage"] = coverage(static_low[sel], static_high[sel], actual[sel])
        rows.append(row)
    return rows, hits


def dacf_comparison(
    model: CarbonModel,
    folder: Path,
    series: dict,
    error_model: WeatherErrorModel,
    test_from: pd.Timestamp,
) -> list[tuple]:
    """Day-ahead MAPE (issued at 00:00 UTC for the next 24 h) vs DACF on the hours both cover, and
    of their equal-weight mean (what the service publishes where a provider has its own forecast,
    domain/blend.py)."""
    results = []
    for path in (
        sorted((folder / "dacf").glob("*_dayahead_*.csv.gz")) if (folder / "dacf").is_dir() else []
    ):
        region = path.name.split("_")[0]
        if f"CC:{region}" not in series:
            continue
        dacf = pd.read_csv(path)
        dacf.index = pd.DatetimeIndex(pd.to_datetime(dacf.pop("datetime_utc"), utc=True))
        dacf = dacf[dacf.index >= test_from]
        arrays = series[f"CC:{region}"]
        midnights = dacf.index[dacf.index.hour == 0]
        issues = arrays.times.get_indexer(midnights)
        issues = issues[(issues >= 336) & (issues + 168 <= len(arrays.times))]
        if len(issues) == 0:
            continue
        issue, lead, _, (_, mid, _) = forecasts_at(
            model, arrays, issues.astype(np.int64), error_model, 0
        )
        day = lead <= 24
        predicted = pd.Series(mid[day], index=arrays.times[(issue + lead - 1)[day]])
        joined = dacf.join(predicted.rename("model"), how="inner").dropna()
        actual = joined["ci_direct_actual_g_per_kwh"].to_numpy()
        theirs = joined["ci_direct_dacf_dayahead_forecast_g_per_kwh"].to_numpy()
        ours = joined["model"].to_numpy()
        results.append(
            (
                region,
                len(joined),
                mape(ours, actual),
                mape(theirs, actual),
                mape(PROVIDER_WEIGHT * theirs + (1 - PROVIDER_WEIGHT) * ours, actual),
            )
        )
    return results


def coverage_by_lead(hits: dict[str, dict[str, np.ndarray]]) -> dict[str, dict]:
    """Per COVERAGE_LEADS bucket: the coverage of all regions' hours pooled (recalibrated model and
    trees alone), the hours, the lowest and highest region, and the regions within 80 ± 5 points."""
    out = {}
    for b, name in enumerate(COVERAGE_NAMES):
        entry: dict = {}
        for key in ("model", "static"):
            counts = np.array([h[key][b] for h in hits.values()])
            per_region = {
                region: 100.0 * h[key][b][0] / h[key][b][1]
                for region, h in hits.items()
                if h[key][b][1]
            }
            label = "coverage" if key == "model" else "static_coverage"
            entry[label] = finite(100.0 * counts[:, 0].sum() / max(counts[:, 1].sum(), 1))
            entry[f"{label}_min"] = finite(min(per_region.values(), default=float("nan")))
            entry[f"{label}_max"] = finite(max(per_region.values(), default=float("nan")))
            entry[f"{label}_regions_within"] = sum(
                abs(v - NOMINAL) <= TOLERANCE for v in per_region.values()
            )
            entry["hours"] = int(counts[:, 1].sum())
        entry["within"] = (
            entry["coverage"] is not None and abs(entry["coverage"] - NOMINAL) <= TOLERANCE
        )
        out[name] = entry
    return out


def coverage_table(by_lead: dict[str, dict], regions: int) -> Table:
    table = Table(
        title="10-90 % interval coverage by lead, all regions' hours pooled (nominal 80 %)"
    )
    for column in (
        "lead h",
        "hours",
        "model",
        "regions 75-85 %",
        "lowest-highest region",
        "trees alone",
    ):
        table.add_column(column, justify="right")
    for name, e in by_lead.items():
        table.add_row(
            name,
            f"{e['hours']:,}",
            f"{e['coverage']:.1f} %" if e["within"] else f"[red]{e['coverage']:.1f} %[/red]",
            f"{e['coverage_regions_within']} / {regions}",
            f"{e['coverage_min']:.1f}-{e['coverage_max']:.1f} %",
            f"{e['static_coverage']:.1f} %",
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, required=True, help="folder laid out like ../shared/data/carbon"
    )
    parser.add_argument(
        "--train-until", type=utc, help="train on hours before this date (ignored with --model)"
    )
    parser.add_argument(
        "--test-from",
        type=utc,
        required=True,
        help="evaluate forecasts whose horizon starts here or later",
    )
    parser.add_argument("--test-until", type=utc, help="and ends before this date")
    parser.add_argument(
        "--model", type=Path, help="evaluate this trained model instead of training one"
    )
    parser.add_argument(
        "--save-model",
        type=Path,
        help="write the model trained here (to evaluate it again with --model)",
    )
    parser.add_argument(
        "--holdout-regions", default="", help="comma-separated zone ids kept out of training"
    )
    parser.add_argument(
        "--stride", type=int, default=25, help="hours between issue times in the test period"
    )
    parser.add_argument("--max-iter", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--allow-overlap",
        action="store_true",
        help="score a --model on a test period that overlaps its training period (warned, marked in --json)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object with every figure (tables go to stderr)",
    )
    args = parser.parse_args()
    if not (args.data / "em_hourly").is_dir() and not (args.data / "carboncast").is_dir():
        parser.error(
            f"{args.data} has neither em_hourly/ nor carboncast/ (a folder laid out like ../shared/data/carbon)"
        )
    with stdout_to_stderr(args.json):
        report = run(args, parser)
    if args.json:
        print_json(report)


# long: the bench's protocol in order, one block per step of its docstring
def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    console = Console(width=160, stderr=args.json)
    overlap = None

    started = time.perf_counter()
    series = load_folder(args.data)
    holdout = {r for r in args.holdout_regions.split(",") if r}
    error_model = calibrate_weather_error(series) or load_weather_error(WEATHER_ERROR_PATH)
    if args.model:
        model = load_model(args.model)
        console.print(f"model {model.version} (trained until {model.metadata.get('train_until')})")
        overlap = training_overlap(model, args.test_from)
        if overlap and not args.allow_overlap:
            console.print(
                f"[red]refused: {overlap}; test from {model.metadata.get('train_until', 'a later date')} "
                f"or pass --allow-overlap[/red]"
            )
            sys.exit(2)
        if overlap:
            console.print(f"[bold red]WARNING (--allow-overlap): {overlap}[/bold red]")
    else:
        if args.train_until is None or args.train_until > args.test_from:
            parser.error("--train-until must be given and not after --test-from (or pass --model)")
        train_series = [s for s in series if s.region not in holdout]
        model = train(
            train_series, args.train_until, error_model, max_iter=args.max_iter, seed=args.seed
        )
        console.print(
            f"trained {model.version} on {model.metadata['rows']} rows in {time.perf_counter() - started:.0f} s"
        )
        if args.save_model:
            save_model(model, args.save_model)
    console.print(
        f"weather error at {error_model.reference_lead_h:.0f} h lead: temperature {error_model.temperature_sigma_c} °C, "
        f"wind {error_model.wind_sigma_ms} m/s, cloud {error_model.cloud_sigma_pct} pp ({error_model.source})"
    )

    rows, arrays_by_name, skipped = [], {}, []
    hits: dict[str, dict[str, np.ndarray]] = {}  # region -> model / static -> counts
    for one in progress(series, "regions"):
        arrays = RegionArrays(one)
        arrays_by_name[one.name] = arrays
        issues = issue_positions(arrays, args.test_from, args.test_until, args.stride)
        if len(issues):
            region_rows, hits[one.name] = evaluate(model, arrays, issues, error_model, args.seed)
            rows += region_rows
        else:
            skipped.append(
                f"{one.name}: no 168 h horizon in the test period (data {arrays.times[0]:%Y-%m-%d} "
                f"to {arrays.times[-1]:%Y-%m-%d})"
            )
    for line in skipped:
        console.print(f"[yellow]skipped[/yellow] {line}")
    if not rows:
        console.print(
            f"[red]no region has a full 168 h horizon after {args.test_from:%Y-%m-%d}[/red]"
        )
        sys.exit(2)

    table = Table(
        title=f"168 h forecasts, test from {args.test_from:%Y-%m-%d}, one issue every {args.stride} h (MAPE % / wMAPE %)"
    )
    for column in (
        "region",
        "lead h",
        "model",
        "trees alone",
        "naive 24h",
        "naive 168h",
        "mean 7d",
        "gain vs seasonal",
        "beats best naive",
        "cover trees",
        "cover 10-90",
    ):
        table.add_column(column, justify="left" if column == "region" else "right")
    gains = {key: {b: [] for b in BUCKET_NAMES} for key in ("model", "static")}
    not_worse = {"model": 0, "static": 0}
    mape_bought = {"model": 0, "static": 0}
    strict_bought = {
        "model": [],
        "static": [],
    }  # beats some naive baseline on MAPE, loses to it on wMAPE
    for row in rows:
        seasonal = min(row[name].mape for name in SEASONAL)
        best_naive = min((row[name] for name in BASELINES), key=lambda s: s.mape)
        for key in ("static", "model"):  # the model's verdict last: it goes into the table
            gains[key][row["bucket"]].append(improvement(row[key].mape, seasonal))
            ok = row[key].mape <= best_naive.mape
            bought = ok and row[key].wmape > best_naive.wmape
            not_worse[key] += ok
            mape_bought[key] += bought
            if any(
                row[key].mape <= row[n].mape and row[key].wmape > row[n].wmape for n in BASELINES
            ):
                strict_bought[key].append(f"{row['region']} {row['bucket']}")
        tag = " (H)" if row["region"].split(":")[1] in holdout else ""
        table.add_row(
            row["region"] + tag,
            row["bucket"],
            fmt(row["model"]),
            fmt(row["static"]),
            *(fmt(row[n]) for n in BASELINES),
            f"{gains['model'][row['bucket']][-1]:+.1f} %",
            ("[yellow]yes, wMAPE worse[/yellow]" if bought else "yes") if ok else "[red]no[/red]",
            f"{row['static_coverage']:.1f}",
            f"{row['coverage']:.1f}",
        )
    console.print(table)

    summary = Table(title="summary over region-buckets: recalibrated model (trees alone)")
    for column in ("lead h", "median gain vs better seasonal naive", "region-buckets"):
        summary.add_column(column, justify="right")
    for bucket in BUCKET_NAMES:
        summary.add_row(
            bucket,
            f"{np.nanmedian(gains['model'][bucket]):+.1f} % ({np.nanmedian(gains['static'][bucket]):+.1f} %)",
            str(len(gains["model"][bucket])),
        )
    console.print(summary)
    for key, label in (("model", "recalibrated model"), ("static", "trees alone")):
        console.print(
            f"{label}: not worse than the best naive baseline (MAPE) in {not_worse[key]}/{len(rows)} region-buckets "
            f"({100 * not_worse[key] / len(rows):.0f} %); of those with a worse wMAPE than that baseline: {mape_bought[key]}; "
            f"better MAPE but worse wMAPE than any one naive baseline: {len(strict_bought[key])} {strict_bought[key]}"
        )
    for label, key in (
        ("trees alone (split-conformal table)", "static_coverage"),
        ("recalibrated on the last 4 weeks", "coverage"),
    ):
        cov = [r[key] for r in rows]
        within = sum(abs(c - 80.0) <= 5.0 for c in cov)
        console.print(
            f"10-90 % interval coverage, {label}: median {np.median(cov):.1f} %, range {min(cov):.1f}-{max(cov):.1f} % "
            f"(nominal 80 %); within 80 ± 5 points in {within}/{len(cov)} region-buckets"
        )

    by_lead = coverage_by_lead(hits)
    console.print(coverage_table(by_lead, len(hits)))

    comparison = dacf_comparison(model, args.data, arrays_by_name, error_model, args.test_from)
    if comparison:
        dacf = Table(
            title="day-ahead (issued 00:00 UTC, next 24 h) vs DACF's published forecasts, MAPE %"
        )
        for column in ("region", "hours", "model", "DACF", "model / DACF", "blend 50/50"):
            dacf.add_column(column, justify="right")
        for region, hours, ours, theirs, both in comparison:
            dacf.add_row(
                region,
                str(hours),
                f"{ours:.2f}",
                f"{theirs:.2f}",
                f"{ours / theirs:.2f}",
                f"{both:.2f}",
            )
        console.print(dacf)
    console.print(f"total {time.perf_counter() - started:.0f} s")
    score = lambda s: {"mape": finite(s.mape), "wmape": finite(s.wmape)}  # noqa: E731
    return {
        "data": str(args.data),
        "model": model.version,
        "trained_until": model.metadata.get("train_until"),
        "test_from": args.test_from.isoformat(),
        "test_until": args.test_until.isoformat() if args.test_until else None,
        "overlap_with_training": overlap,
        "stride_h": args.stride,
        "holdout_regions": sorted(holdout),
        "skipped": skipped,
        "weather_error": {
            "source": error_model.source,
            "temperature_sigma_c": error_model.temperature_sigma_c,
            "wind_sigma_ms": error_model.wind_sigma_ms,
            "cloud_sigma_pct": error_model.cloud_sigma_pct,
        },
        "rows": [
            {
                "region": row["region"],
                "bucket": row["bucket"],
                "coverage": finite(row["coverage"]),
                "static_coverage": finite(row["static_coverage"]),
                **{key: score(row[key]) for key in ("model", "static", *BASELINES)},
            }
            for row in rows
        ],
        "median_gain_vs_seasonal": {
            key: {
                b: finite(float(np.nanmedian(gains[key][b]))) if gains[key][b] else None
                for b in BUCKET_NAMES
            }
            for key in gains
        },
        "not_worse_than_best_naive": not_worse,
        "region_buckets": len(rows),
        "mape_bought_with_worse_wmape": mape_bought,
        "coverage_by_lead": by_lead,
        "coverage_median": {
            key: float(np.median([r[key] for r in rows])) for key in ("coverage", "static_coverage")
        },
        "dacf": [
            {
                "region": region,
                "hours": hours,
                "model_mape": ours,
                "dacf_mape": theirs,
                "blend_mape": both,
            }
            for region, hours, ours, theirs, both in comparison
        ],
        "seconds": time.perf_counter() - started,
    }


if __name__ == "__main__":
    main()
