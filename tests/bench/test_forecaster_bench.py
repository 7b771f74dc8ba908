"""The forecaster benchmark refuses to score a model on the hours it was trained on, unless told to."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from metatune_forecaster.adapters.model_files import load_model
from metatune_forecaster.adapters.package_data import MODEL_PATH
from tests.support.plugin import TEST_DATA

from .conftest import BENCH, load_bench

bench = load_bench("forecaster_bench")


def test_training_overlap_uses_the_period_the_model_records() -> None:
    model = load_model(MODEL_PATH)
    trained_until = pd.Timestamp(model.metadata["train_until"])
    assert bench.training_overlap(model, trained_until) is None
    message = bench.training_overlap(model, trained_until - pd.Timedelta(hours=1))
    assert message is not None and "partly in-sample" in message


@pytest.fixture
def two_zones(tmp_path: Path) -> Path:
    """DE and NO of the traces the repository ships (NO has no weather file: none in the data)."""
    carbon = TEST_DATA / "carbon"
    for sub in ("em_hourly", "em_weather"):
        (tmp_path / sub).mkdir()
        for zone in ("DE", "NO"):
            if (carbon / sub / f"{zone}.csv.gz").exists():
                (tmp_path / sub / f"{zone}.csv.gz").symlink_to(carbon / sub / f"{zone}.csv.gz")
    return tmp_path


def _bench(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            str(BENCH / "forecaster_bench.py"),
            "--data",
            str(folder),
            "--model",
            str(MODEL_PATH),
            "--test-until",
            "2023-12-01",
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.slow  # trains the forecaster
def test_overlapping_test_period_is_refused_or_marked(two_zones: Path) -> None:
    refused = _bench(two_zones, "--test-from", "2022-11-01")
    assert refused.returncode == 2 and "partly in-sample" in refused.stderr and refused.stdout == ""
    allowed = _bench(two_zones, "--test-from", "2022-11-01", "--allow-overlap")
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    report = json.loads(allowed.stdout)
    assert "partly in-sample" in report["overlap_with_training"] and "WARNING" in allowed.stderr
    clean = json.loads(_bench(two_zones, "--test-from", "2023-11-01").stdout)
    assert clean["overlap_with_training"] is None and {row["region"] for row in clean["rows"]} == {
        "EM:DE",
        "EM:NO",
    }
