"""The interval bench: cross-conformal coverage and width with the label probe and without it, on a
knowledge base whose datasets differ in how high their results lie."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from metatune.knowledge import KbFileHeader
from metatune.knowledge.files import write_kb_file
from metatune_recommender.domain.intervals import HeldOut
from tests.support.synthetic_kb import levelled_kb

from .conftest import BENCH, load_bench

bench = load_bench("interval_bench")
FIGURES = (
    "interval_coverage",
    "interval_median_width",
    "top3_interval_coverage",
    "top3_interval_median_width",
    "top3_mae",
)


def test_no_dataset_is_given_an_interval_calibrated_on_itself() -> None:
    # two datasets: each one's factor comes from the other's residuals alone
    held = {
        "a": [HeldOut(0.5, 0.5, 0.1), HeldOut(0.7, 0.5, 0.1)],  # misses by 0 and 2 stds
        "b": [HeldOut(0.5, 0.4, 0.1), HeldOut(0.5, 0.6, 0.1)],  # misses by 1 std each
    }
    figures = bench.cross_conformal(held, "accuracy")
    # a's factor is 1 (b's misses): a's 0.7 falls outside; b's factor is 2: both inside
    assert figures["interval_coverage"] == 3 / 4
    assert figures["interval_median_width"] == pytest.approx(0.3)  # widths 0.2, 0.2, 0.4, 0.4


def test_the_bench_reports_the_probe_against_the_baseline_as_one_json_object(
    tmp_path: Path,
) -> None:
    kb = tmp_path / "levelled.jsonl"
    write_kb_file(kb, KbFileHeader(), levelled_kb(probed=True))
    done = subprocess.run(
        [sys.executable, str(BENCH / "interval_bench.py"), "--kb", str(kb), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["datasets"] == report["probed_datasets"] == 5
    for key in FIGURES:
        assert report[key] is not None and key in report["baseline"]
    assert report["top3_mae"] < report["baseline"]["top3_mae"]
    assert report["interval_median_width"] < report["baseline"]["interval_median_width"]


def test_a_knowledge_base_without_probes_is_refused_in_one_line(tmp_path: Path) -> None:
    kb = tmp_path / "unprobed.jsonl"
    write_kb_file(kb, KbFileHeader(), levelled_kb(probed=False))
    done = subprocess.run(
        [sys.executable, str(BENCH / "interval_bench.py"), "--kb", str(kb)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0 and "metatune kb probe" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
