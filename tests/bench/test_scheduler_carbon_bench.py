"""The scheduler carbon benchmark as a tool: any folder, listed skips, content-keyed cache, honest yardsticks."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metatune.registry import load_registry
from metatune_scheduler.domain.model import Solution

from .conftest import BENCH, load_bench, write_trace

bench = load_bench("scheduler_carbon_bench")

REGISTRY = """
[[datacenter]]
name = "fra1"
region = "DE"
region_group = "EU"
latitude = 50.1
longitude = 8.7
pue = 1.25
gpu_model = "H100-80GB"
gpus = 16
gpu_power_w = 700

[[datacenter]]
name = "osl1"
region = "NO"
region_group = "EU"
latitude = 59.9
longitude = 10.8
pue = 1.1
gpu_model = "H100-80GB"
gpus = 16
gpu_power_w = 700

[[datacenter]]
name = "mad1"
region = "ES"
region_group = "EU"
latitude = 40.4
longitude = -3.7
pue = 1.2
gpu_model = "H100-80GB"
gpus = 16
gpu_power_w = 700

[[datacenter]]
name = "lon1"
region = "GB"
region_group = "EU"
latitude = 51.5
longitude = -0.1
pue = 1.2
gpu_model = "H100-80GB"
gpus = 16
gpu_power_w = 700
"""

START = "2024-01-10"


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, Path]:
    """DE and NO cover the period, GB stops short, ES has no file, FR has data but no datacenter."""
    data = tmp_path / "carbon"
    first = pd.Timestamp(START) - pd.Timedelta(days=9)
    write_trace(data, "DE", str(first), 24 * 30, 400, seed=1)
    write_trace(data, "NO", str(first), 24 * 30, 30, seed=2)
    write_trace(data, "GB", str(first), 24 * 10, 250, seed=3)
    write_trace(data, "FR", str(first), 24 * 30, 60, seed=4)
    registry = tmp_path / "datacenters.toml"
    registry.write_text(REGISTRY)
    return data, registry


def test_missing_and_short_zones_are_listed_not_fatal(folder: tuple[Path, Path]) -> None:
    data, registry = folder
    fleet = bench.load(
        data, pd.Timestamp(START, tz="UTC"), 24 + bench.TAIL_H + 168, load_registry(registry)
    )
    assert fleet.names == ["fra1", "osl1"]
    assert fleet.series.shape == (2, bench.HISTORY_H + 24 + bench.TAIL_H + 168)
    assert len(fleet.skipped) == 2
    assert fleet.skipped[0].startswith("mad1 (ES): no em_hourly/ES.csv.gz")
    assert fleet.skipped[1].startswith("lon1 (GB): GB.csv.gz covers")
    assert fleet.unused_zones == ["FR", "GB"]


def test_zones_option_picks_registry_datacenters(folder: tuple[Path, Path]) -> None:
    data, registry = folder
    fleet = bench.load(
        data, pd.Timestamp(START, tz="UTC"), 200, load_registry(registry), ["NO", "ES"]
    )
    assert fleet.names == ["osl1"] and fleet.skipped == [
        f"mad1 (ES): no em_hourly/ES.csv.gz in {data}"
    ]
    with pytest.raises(Exception, match="XX: not in the registry"):
        bench.load(data, pd.Timestamp(START, tz="UTC"), 200, load_registry(registry), ["XX"])


def test_forecast_cache_key_follows_data_content_not_folder_name(
    folder: tuple[Path, Path], tmp_path: Path
) -> None:
    data, _ = folder
    start = pd.Timestamp(START, tz="UTC")
    key = bench.forecast_cache_key(data, "DE", start, 104, bench.MODEL_PATH, 7)
    copy = tmp_path / "elsewhere"
    shutil.copytree(data, copy)
    assert (
        bench.forecast_cache_key(copy, "DE", start, 104, bench.MODEL_PATH, 7) == key
    )  # same bytes, same forecasts
    write_trace(copy, "DE", "2023-12-01", 24 * 30, 401, seed=1)  # other numbers under the same name
    assert bench.forecast_cache_key(copy, "DE", start, 104, bench.MODEL_PATH, 7) != key
    assert bench.forecast_cache_key(data, "NO", start, 104, bench.MODEL_PATH, 7) != key


def _solution(objective: float, gap: float | None, bound: float | None, unmet: int = 0) -> Solution:
    return Solution(
        layout=None,
        x=np.zeros(0, dtype=np.int64),
        unmet=np.array([unmet]),
        objective=objective,
        mip_gap=gap,
        seconds=0.0,
        optimal=gap is not None and gap <= 0.001,
        dual_bound=bound,
    )


def test_offline_yardstick_keeps_a_zero_gap_and_never_invents_a_bound() -> None:
    warm = _solution(120.0, None, None)
    exact = bench.offline_yardstick(_solution(100.0, 0.0, None), warm)
    assert (exact.objective, exact.bound, exact.gap, exact.hit_limit) == (100.0, 100.0, 0.0, False)
    unknown = bench.offline_yardstick(
        _solution(130.0, None, None), warm
    )  # HiGHS found nothing better, no gap
    assert (unknown.objective, unknown.bound, unknown.gap, unknown.hit_limit) == (
        120.0,
        None,
        None,
        True,
    )
    bounded = bench.offline_yardstick(
        _solution(130.0, 0.5, 90.0), warm
    )  # the warm start wins, HiGHS's bound holds
    assert (bounded.objective, bounded.bound) == (120.0, 90.0) and bounded.gap == pytest.approx(
        0.25
    )


def test_free_migration_yardstick_reports_the_bound_it_reached() -> None:
    rng = np.random.default_rng(0)
    jobs = bench.make_jobs(rng, 2, 12.0, 3, np.array(["EU", "EU", "EU"]), residency=False)
    hours = int(jobs.deadline.max()) + 1
    ci = np.stack([300 + 100 * np.sin(np.arange(hours) / 24 * 2 * np.pi + k) for k in range(3)])
    pue = np.array([1.1, 1.2, 1.3])
    stopped = bench.free_migration_optimum(jobs, ci, pue, 16, time_limit_s=1e-4)
    solved = bench.free_migration_optimum(jobs, ci, pue, 16, time_limit_s=60)
    assert stopped.hit_limit and not solved.hit_limit
    assert (
        stopped.bound is not None
        and math.isfinite(stopped.bound)
        and 0 < stopped.bound <= solved.objective * 1.0001
    )
    assert solved.bound == pytest.approx(solved.objective, rel=2e-3)


def test_runs_end_to_end_on_an_unseen_folder(folder: tuple[Path, Path]) -> None:
    data, registry = folder
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "scheduler_carbon_bench.py"),
            "--data",
            str(data),
            "--registry",
            str(registry),
            "--start",
            START,
            "--days",
            "1",
            "--jobs-per-day",
            "8",
            "--settings",
            "tight",
            "--tight",
            "8",
            "--forecast",
            "naive",
            "--solve-limit-s",
            "1",
            "--refresh-h",
            "6",
            "--offline-limit-s",
            "5",
            "--free-migration-limit-s",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)  # exactly one object, nothing else on stdout
    assert report["datacenters"] == ["fra1", "osl1"] and len(report["skipped"]) == 2
    tight = report["settings"]["tight"]
    assert tight["o_t"] > 0 and tight["free_migration"]["bound_t"] > 0
    assert (
        tight["free_migration"]["bound_t"] <= tight["s_star_t"]
        and tight["p2_t"] >= tight["o_t"] * 0.999
    )
