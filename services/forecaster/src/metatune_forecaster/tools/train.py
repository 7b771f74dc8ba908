"""Train the forecaster's model: ``python -m metatune_forecaster.tools.train --data DIR``.

Reads a folder laid out like the team's ``carbon/`` data, builds feature rows from every region
with a time split (no training row looks at a target hour at or after ``--train-until``),
fits the per-lead-block trees and writes the model artifact and its weather-error calibration.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..adapters.carbon_folder import load_folder
from ..adapters.model_files import load_weather_error, save_model, save_weather_error
from ..adapters.package_data import MODEL_PATH, WEATHER_ERROR_PATH
from ..domain.features import FEATURE_NAMES, RegionArrays
from ..domain.model import (
    BLOCK_CAPACITY,
    BLOCK_EXCLUDED_FEATURES,
    ENSEMBLE_SIZE,
    FEATURE_SHARE,
    LEAD_BUCKETS,
    MIN_RATIO_WEIGHT,
    BlockRows,
    CarbonModel,
    fit,
)
from ..domain.samples import build_grid, issue_positions
from ..domain.series import RegionSeries
from ..domain.weather_error import WeatherErrorModel, calibrate
from .arguments import data_folder_parser

CALIBRATION_SHARE = (
    0.15  # latest share of each region's training issues kept to calibrate intervals
)
BLOCK_STRIDES_H = (
    11,
    17,
    17,
)  # hours between training issues per lead block: short leads get the most rows
CLOUD_SIGMA_PCT = 30.0  # GFS carries no cloud cover: a typical 2-day cloud-cover error
GFS_OBSERVED_PAIRS = (
    ("CISO", "US-CAL-CISO"),
    ("ERCO", "US-TEX-ERCO"),
    ("PJM", "US-MIDA-PJM"),
    ("DE", "DE"),
)


def calibrate_weather_error(series: list[RegionSeries]) -> WeatherErrorModel | None:
    """Weather-error model measured on the regions that have both GFS forecasts and observations."""
    by_name = {s.name: s for s in series}
    pairs = [
        (by_name[f"CC:{cc}"], by_name[f"EM:{em}"])
        for cc, em in GFS_OBSERVED_PAIRS
        if f"CC:{cc}" in by_name and f"EM:{em}" in by_name
    ]
    return calibrate(pairs, CLOUD_SIGMA_PCT) if pairs else None


def training_rows(
    series: list[RegionSeries],
    train_until: pd.Timestamp,
    error_model: WeatherErrorModel,
    lead_range: tuple[int, int],
    stride_h: int,
    leads_per_issue: int = 12,
    rng: np.random.Generator | None = None,
) -> BlockRows:
    """Rows of one lead block over every region: issues every ``stride_h`` h, ``leads_per_issue``
    random leads of ``lead_range`` each; the latest issues of each region form the calibration slice."""
    rng = rng or np.random.default_rng(0)
    frames, ratios, calibration = [], [], []
    for one in series:
        arrays = RegionArrays(one)
        issues = issue_positions(arrays, None, train_until, stride_h)
        if len(issues) == 0:
            continue
        grid = build_grid(arrays, issues, error_model, rng, leads_per_issue, lead_range)
        ratio = grid.actual() / grid.scale()
        keep = np.isfinite(ratio) & (grid.scale() > 0)
        cut = issues[int(len(issues) * (1 - CALIBRATION_SHARE))]
        frames.append(grid.features[keep])
        ratios.append(ratio[keep])
        calibration.append(grid.issue[keep] >= cut)
    if not frames:
        raise ValueError(f"no region has training data before {train_until}")
    return BlockRows(
        pd.concat(frames, ignore_index=True), np.concatenate(ratios), np.concatenate(calibration)
    )


def train(
    series: list[RegionSeries],
    train_until: pd.Timestamp,
    error_model: WeatherErrorModel,
    max_iter: int = 200,
    strides_h: tuple[int, ...] = BLOCK_STRIDES_H,
    leads_per_issue: int = 12,
    seed: int = 0,
    ensemble_size: int = ENSEMBLE_SIZE,
) -> CarbonModel:
    """Fit the per-block trees on every hour before ``train_until`` (targets included)."""
    rng = np.random.default_rng(seed)
    blocks = [
        training_rows(series, train_until, error_model, lead_range, stride_h, leads_per_issue, rng)
        for lead_range, stride_h in zip(LEAD_BUCKETS, strides_h, strict=True)
    ]
    layout = f"{FEATURE_NAMES}|{[sorted(names) for names in BLOCK_EXCLUDED_FEATURES]}|{BLOCK_CAPACITY}|{MIN_RATIO_WEIGHT}|{max_iter}|{strides_h}|{leads_per_issue}|{ensemble_size}x{FEATURE_SHARE}"
    digest = hashlib.sha256(
        "|".join(s.name for s in series).encode() + str(train_until).encode() + layout.encode()
    ).hexdigest()[:8]
    version = f"hgb-blocks-{train_until:%Y%m%d}-{digest}"
    metadata = {
        "regions": [s.name for s in series],
        "train_until": train_until.isoformat(),
        "rows": int(sum(len(b.ratio) for b in blocks)),
        "rows_per_block": [len(b.ratio) for b in blocks],
        "max_iter": max_iter,
        "block_capacity": [list(c) for c in BLOCK_CAPACITY],
        "min_ratio_weight": MIN_RATIO_WEIGHT,
        "block_excluded_features": [sorted(names) for names in BLOCK_EXCLUDED_FEATURES],
        "ensemble": {"size": ensemble_size, "feature_share": FEATURE_SHARE},
        "weather_error": error_model.model_dump(),
    }
    return fit(
        blocks,
        version,
        max_iter=max_iter,
        seed=seed,
        metadata=metadata,
        ensemble_size=ensemble_size,
    )


def main(argv: list[str] | None = None) -> None:
    parser = data_folder_parser(__doc__, "folder laid out like carbon/")
    parser.add_argument(
        "--train-until", type=pd.Timestamp, default=pd.Timestamp("2023-01-01", tz="UTC")
    )
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    parser.add_argument("--weather-error-out", type=Path, default=WEATHER_ERROR_PATH)
    parser.add_argument("--max-iter", type=int, default=200)
    args = parser.parse_args(argv)
    train_until = (
        args.train_until if args.train_until.tzinfo else args.train_until.tz_localize("UTC")
    )

    started = time.perf_counter()
    series = load_folder(args.data)
    error_model = calibrate_weather_error(series)
    if error_model is None:
        error_model = load_weather_error(WEATHER_ERROR_PATH)
    else:
        save_weather_error(error_model, args.weather_error_out)
    model = train(series, train_until, error_model, max_iter=args.max_iter)
    save_model(model, args.out)
    size_kb = args.out.stat().st_size / 1024
    print(
        f"model {model.version}: {model.metadata['rows']} rows from {len(series)} regions, "
        f"trained until {train_until:%Y-%m-%d}, "
        f"{size_kb:.0f} kB at {args.out}, {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
