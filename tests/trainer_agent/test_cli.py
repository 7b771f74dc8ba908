"""`metatune train FILE`: the agent's code path from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metatune_cli.cli.main import app


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("METATUNE_DATA_DIR", str(tmp_path / "data"))
    return CliRunner()


@pytest.mark.parametrize(
    "devices",
    [
        pytest.param(1, id="one-process"),
        pytest.param(2, id="two-processes", marks=pytest.mark.slow),  # two processes train
    ],
)
def test_train_prints_metrics_tokens_energy_and_time_as_json(
    runner: CliRunner, intents_binary: Path, tmp_path: Path, devices: int
) -> None:
    adapter = tmp_path / "adapter.tar"
    result = runner.invoke(
        app,
        [
            "train",
            str(intents_binary),
            "--task",
            "classification",
            "--set",
            "rank=4",
            "--set",
            "lr=3e-3",
            "--set",
            "bs=8",
            "--set",
            "seq_len=32",
            "--max-steps",
            "2",
            "--json",
            "--adapter-out",
            str(adapter),
            "--g-per-kwh",
            "300",
            "--pue",
            "1.2",
            "--devices",
            str(devices),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert report["status"] == "completed" and report["steps"] == 2
    assert report["config"]["rank"] == 4 and report["config"]["learning_rate"] == 3e-3
    assert report["metrics"]["val_loss"] > 0 and 0 <= report["metrics"]["accuracy"] <= 1
    assert 0 < report["tokens"] <= report["tokens_with_padding"]
    assert report["energy_wh"] > 0 and report["seconds"] > 0
    # emissions priced at the given intensity and PUE; the speed inside steps is not diluted by loading
    assert report["emissions_g"] == pytest.approx(report["energy_wh"] / 1000 * 1.2 * 300, rel=1e-6)
    assert 0 < report["train_seconds"] < report["seconds"]
    assert report["step_tokens_per_second"] > report["tokens_per_second"]
    assert report["gpu_hours"] == 0.0  # on the CPU
    assert adapter.stat().st_size > 0


def test_train_rejects_an_out_of_range_config_with_its_reason(
    runner: CliRunner, intents_binary: Path
) -> None:
    result = runner.invoke(
        app, ["train", str(intents_binary), "--set", "rank=0", "--max-steps", "2"]
    )
    assert result.exit_code == 2
    assert "invalid_config" in result.output and "rank" in result.output
