"""Benchmarks are scripts in bench/, not a package: tests load them by path."""

from __future__ import annotations

import gzip
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # what `python bench/x.py` does: the scripts import benchkit
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def write_trace(
    folder: Path, zone: str, start: str, hours: int, level: float, seed: int = 0
) -> Path:
    """An ``em_hourly/<zone>.csv.gz`` file as in a carbon data folder the benches read: a daily cycle plus noise."""
    times = pd.date_range(start, periods=hours, freq="h", tz="UTC")
    rng = np.random.default_rng(seed)
    ci = level * (1 + 0.3 * np.sin(2 * np.pi * np.arange(hours) / 24)) + rng.normal(0, 5, hours)
    frame = pd.DataFrame(
        {
            "datetime_utc": times.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "zone_id": zone,
            "ci_direct_g_per_kwh": ci.round(2),
        }
    )
    path = folder / "em_hourly" / f"{zone}.csv.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        frame.to_csv(fh, index=False)
    return path
