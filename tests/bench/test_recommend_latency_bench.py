"""The recommend latency bench's pieces that decide its verdicts: when two runs' advice is the
same, and the commands' environment (the bench's figures themselves need a fit: minutes)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from .conftest import load_bench

bench = load_bench("recommend_latency_bench")


def advice() -> dict[str, Any]:
    rec = {
        "config": {"rank": 8, "alpha": 16.0, "learning_rate": 2e-4},
        "predicted": 0.81,
        "std": 0.04,
        "metric_name": "accuracy",
        "estimated_gpu_hours": 0.01,
        "energy_wh": 3.2,
        "power_kw": 0.3,
        "acquisition": "top-k",
        "expected_improvement": None,
    }
    return {
        "recommendations": [rec, {**rec, "config": {"rank": 16}}],
        "source": "knowledge-base",
        "base_model": "m",
        "imputed_features": [],
        "warnings": [],
        "error": None,
        "throughput_device": "cpu",
        "best_ei": None,
    }


def test_identical_advice_differs_by_nothing() -> None:
    assert bench.differences(advice(), advice()) == 0.0


def test_predictions_that_moved_are_measured_not_refused() -> None:
    other = copy.deepcopy(advice())
    other["recommendations"][1]["std"] += 1e-12
    gap = bench.differences(advice(), other)
    assert gap is not None and 0 < gap < 1e-11


def test_another_configuration_or_source_is_other_advice() -> None:
    other = copy.deepcopy(advice())
    other["recommendations"][0]["config"]["rank"] = 4
    assert bench.differences(advice(), other) is None
    other = copy.deepcopy(advice())
    other["source"] = "cold-start"
    assert bench.differences(advice(), other) is None
    other = copy.deepcopy(advice())
    other["recommendations"].pop()
    assert bench.differences(advice(), other) is None


def test_the_commands_keep_bytecode_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    plain = bench.cli_env(tmp_path / "data", None)
    assert plain["METATUNE_DATA_DIR"] == str(tmp_path / "data")
    assert plain["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in plain
    kept = bench.cli_env(tmp_path / "data", tmp_path / "pyc")
    assert "PYTHONDONTWRITEBYTECODE" not in kept
    assert kept["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pyc")


def test_the_command_names_every_knowledge_base_and_the_model(tmp_path: Path) -> None:
    argv = bench.recommend_argv(tmp_path / "p.json", [Path("a.jsonl"), Path("b.jsonl")], "m", 5)
    tail = argv[argv.index("recommend") :]
    assert tail == [
        "recommend",
        str(tmp_path / "p.json"),
        "--json",
        "--k",
        "5",
        "--kb",
        "a.jsonl",
        "--kb",
        "b.jsonl",
        "--base-model",
        "m",
    ]
