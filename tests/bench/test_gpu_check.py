"""bench/gpu_check.sh on a machine without CUDA: it runs what a CPU can (fp32 and bf16 against the
trainer bench's naive loop, two trials sharing the device, the agent's heartbeat), skips the GPU
parts with their reasons, and writes one gpu_check.json under --out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from metatune_trainer_agent.adapters.hardware import cpu_model

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="a GPU machine: the CUDA parts run"
)


def _check(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--out", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=590,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )


def _report(out: Path) -> dict:
    return json.loads((out / "gpu_check.json").read_text())


def test_without_cuda_the_gpu_parts_are_skipped_with_their_reasons(tmp_path: Path) -> None:
    done = _check(tmp_path, "--quick", "--parts", "energy", "multi_device", "heartbeat")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = _report(tmp_path)
    assert report["device"] == cpu_model() and report["device_type"] == "cpu"
    assert report["gpus"] == 0 and report["nvml"]["available"] is False
    parts = report["parts"]
    assert list(parts) == ["energy", "multi_device", "heartbeat"]
    energy, multi = parts["energy"], parts["multi_device"]
    assert energy["status"] == "skipped" and "no CUDA device" in energy["reason"]
    assert report["nvml"]["reason"] in energy["reason"]  # why NVML cannot be asked
    assert energy["cpu_counter"] in {"rapl", "model"}  # what charges a CPU run instead
    assert multi["status"] == "skipped" and "NCCL needs at least 2 CUDA devices" in multi["reason"]
    beat = parts["heartbeat"]
    assert beat["status"] == "ran" and beat["device"] == "cpu" and beat["reports_device"] is True
    assert beat["device_model"] == cpu_model() and beat["gpu_memory_mib"] is None
    assert "energy: skipped (no CUDA device" in done.stdout


@pytest.mark.slow  # trains MiniLM six times (a few steps each)
def test_the_quick_cpu_check_measures_precisions_and_two_trials_sharing_the_device(
    tmp_path: Path,
) -> None:
    done = _check(tmp_path, "--quick")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = _report(tmp_path)
    assert report["quick"] is True and list(report["parts"]) == [
        "precision",
        "energy",
        "shared_gpu",
        "multi_device",
        "heartbeat",
    ]
    precision = report["parts"]["precision"]
    assert precision["status"] == "ran" and precision["auto_picks"] in {"bf16", "fp32"}
    rows = {row["variant"]: row for row in precision["rows"]}
    assert list(rows) == ["naive", "agent+fp32", "agent+bf16"]
    assert (
        rows["agent+fp32"]["precision"] == "fp32" and rows["agent+bf16"]["precision"] == "bfloat16"
    )
    steps = report["budget"]["steps"]
    for row in rows.values():
        assert row["status"] == "completed" and row["steps"] == steps
        assert row["useful_tokens"] > 0 and row["useful_tokens_per_s"] > 0
    assert rows["agent+fp32"]["speedup_vs_fp32"] == 1.0
    assert precision["skipped"] == [
        {
            "precision": "fp16",
            "reason": "fp16 autocast with a grad scaler is the CUDA path; no CUDA device",
        }
    ]
    shared = report["parts"]["shared_gpu"]
    assert shared["status"] == "ran" and shared["device"] == "cpu" and len(shared["trials"]) == 2
    assert all(t["status"] == "completed" and t["steps"] == steps for t in shared["trials"])
    # the same trial twice at once sees the same tokens as alone
    assert {t["useful_tokens"] for t in shared["trials"]} == {shared["alone"]["useful_tokens"]}
    assert shared["peak_memory_mib"] is None
    for name in ("energy", "multi_device"):
        assert report["parts"][name]["status"] == "skipped" and report["parts"][name]["reason"]


def test_a_missing_data_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _check(tmp_path, "--data", str(tmp_path / "absent.jsonl"))
    assert done.returncode == 2
    assert (
        done.stderr.strip().splitlines()[-1]
        == f"error: --data {tmp_path / 'absent.jsonl'}: no such file"
    )
    assert not (tmp_path / "gpu_check.json").exists()


def test_a_part_that_fails_says_why_in_one_line_and_the_others_still_run(tmp_path: Path) -> None:
    unlabelled = tmp_path / "unlabelled.jsonl"
    unlabelled.write_text('{"text": "a b c"}\n{"text": "d e"}\n')
    done = _check(
        tmp_path, "--quick", "--data", str(unlabelled), "--parts", "precision", "heartbeat"
    )
    assert done.returncode == 1  # a part failed
    parts = _report(tmp_path)["parts"]
    assert parts["precision"]["status"] == "failed"
    assert parts["precision"]["reason"].startswith("InvalidTrainingConfig: no label column found")
    assert "\n" not in parts["precision"]["reason"]
    assert parts["heartbeat"]["status"] == "ran"
    assert "precision: failed (InvalidTrainingConfig: no label column found" in done.stdout
    assert "Traceback" not in done.stderr
