"""The brain bench's figures (order statistics, the k the top-3 matches, the aggregation) and one
real end-to-end run on a tiny dataset: profiled, recommended, trained, and resumed after a kill."""

from __future__ import annotations

import itertools
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from metatune.knowledge.files import read_kb_file, write_kb_file
from metatune.knowledge.records import KbFileHeader
from metatune.knowledge.space import Budget
from metatune_recommender.adapters.flywheel import seed_path

from .conftest import BENCH, load_bench

bench = load_bench("brain_bench")

REPORT_FIELDS = {
    "budget",
    "datasets",
    "interval_coverage",
    "interval_median_width",
    "top3_vs_random_k",
    "top3_beats_portfolio3_share",
    "mean_regret_top3",
    "mean_regret_portfolio3",
    "train_seconds",
    "random_pool",
    "reused_runs",
    "recommender_code",
    "machine",
    "date",
    "load",
}


def brute_force_best_of_k(pool: list[float], k: int) -> float:
    subsets = list(itertools.combinations(pool, k))
    return sum(max(subset) for subset in subsets) / len(subsets)


def test_expected_best_of_k_is_the_exact_mean_over_every_k_subset() -> None:
    assert bench.expected_best_of_k([3.0, 1.0, 2.0]) == pytest.approx([2.0, 8 / 3, 3.0])
    rng = random.Random(4)
    pool = [round(rng.random(), 2) for _ in range(9)] + [0.5, 0.5]  # ties included
    expected = bench.expected_best_of_k(pool)
    assert len(expected) == len(pool)
    for k in range(1, len(pool) + 1):
        assert expected[k - 1] == pytest.approx(brute_force_best_of_k(pool, k))
    assert expected[0] == pytest.approx(statistics.fmean(pool)) and expected[-1] == max(pool)
    assert bench.expected_best_of_k([]) == []


def test_matched_k_is_the_largest_k_whose_expected_best_the_top3_reaches() -> None:
    expected = [0.5, 0.6, 0.7, 0.75]
    assert bench.matched_k(0.65, expected) == 2
    assert bench.matched_k(0.7, expected) == 3  # equal counts as matched
    assert bench.matched_k(0.9, expected) == 4
    assert bench.matched_k(0.4, expected) == 0  # below even one random configuration
    assert bench.matched_k(None, expected) is None


def test_dataset_figures_regrets_against_everything_trained() -> None:
    figures = bench.dataset_figures([0.70, None, 0.60], [0.70, 0.50, 0.55], [0.40, 0.80, 0.60])
    assert figures["top3_best"] == 0.70 and figures["portfolio3_best"] == 0.70
    assert figures["best_all"] == 0.80  # the pool's best counts
    assert figures["regret_top3"] == pytest.approx(0.10)
    assert figures["regret_portfolio3"] == pytest.approx(0.10)
    assert figures["random_k_expected_best"] == pytest.approx([0.6, 2.0 / 3 * 0.8 + 0.6 / 3, 0.8])
    assert figures["regret_random_k"][-1] == pytest.approx(0.0)
    assert figures["top3_vs_random_k"] == 1  # 0.70 reaches 0.6 (k = 1), not 0.733 (k = 2)
    assert figures["top3_beats_portfolio3"] is False  # a tie is not a win
    failed = bench.dataset_figures([None, None, None], [0.5], [None, 0.6])
    assert failed["top3_best"] is None and failed["regret_top3"] is None
    assert failed["random_k_expected_best"] == [0.6] and failed["top3_vs_random_k"] is None


def test_summary_takes_the_median_k_the_share_and_the_mean_regrets() -> None:
    rows = [
        {"dataset": "a", **bench.dataset_figures([0.9], [0.8], [0.5, 0.7, 0.9])},
        {"dataset": "b", **bench.dataset_figures([0.6], [0.7], [0.5, 0.7, 0.8])},
        {"dataset": "c", **bench.dataset_figures([0.75], [0.7], [0.6, 0.7, 0.8])},
        {"dataset": "d", "skipped": "too small"},
    ]
    summary = bench.summarise(rows)
    assert summary["top3_vs_random_k"] == {"per_dataset": {"a": 3, "b": 0, "c": 1}, "median": 1}
    assert summary["top3_beats_portfolio3_share"] == pytest.approx(2 / 3)
    assert summary["mean_regret_top3"] == pytest.approx((0.0 + 0.2 + 0.05) / 3)
    assert summary["mean_regret_portfolio3"] == pytest.approx((0.1 + 0.1 + 0.1) / 3)
    assert bench.summarise([])["top3_vs_random_k"]["median"] is None
    assert summary["interval_coverage"] is None  # no interval was published


def test_intervals_count_the_top3_runs_inside_and_their_median_width() -> None:
    rows = [
        {
            "dataset": "a",
            **bench.dataset_figures(
                [0.9, 0.5, None], [0.8], [0.5], [[0.8, 1.0], [0.6, 0.7], [0.1, 0.3]]
            ),
        },
        {"dataset": "b", **bench.dataset_figures([0.6], [0.7], [0.5], [[0.5, 0.9]])},
    ]
    assert rows[0]["top3_inside_interval"] == [True, False, None]  # a failed run: no verdict
    summary = bench.summarise(rows)
    assert summary["interval_coverage"] == pytest.approx(2 / 3)
    assert summary["interval_median_width"] == pytest.approx(0.2)


def test_the_budget_is_a_study_s_by_default_the_knowledge_base_s_or_given() -> None:
    kb = {"train_rows": 800, "val_rows": 400, "epochs": 2.0, "max_seq_length": 64}
    default, training = bench.study_budget("default", kb)
    assert (default.epochs, default.max_train_rows) == (3.0, 1000)
    assert training == {**kb, "epochs": 3.0, "max_steps": None, "train_rows": 1000}
    own, _ = bench.study_budget("kb", kb)
    assert (own.epochs, own.max_steps, own.max_train_rows) == (2.0, None, 800)
    steps, training = bench.study_budget("max_steps=200,max_train_rows=none", kb)
    assert (steps.epochs, steps.max_steps) == (None, 200)
    assert training["train_rows"] == bench.EVERY_ROW and training["val_rows"] == 400
    for bad in ("epochs", "epochs=1,max_steps=3", "epochs=-1"):
        with pytest.raises(bench.BenchError, match="--budget"):
            bench.study_budget(bad, kb)


def test_random_pools_are_seeded_per_dataset_and_a_larger_k_extends_the_same_pool() -> None:
    budget = Budget(max_steps=64, max_seq_length=128)
    pool = bench.random_pool("sst2", 5, 0, budget)
    assert pool == bench.random_pool("sst2", 5, 0, budget)
    assert bench.random_pool("sst2", 8, 0, budget)[:5] == pool
    assert pool != bench.random_pool("trec6", 5, 0, budget)
    assert pool != bench.random_pool("sst2", 5, 1, budget)
    assert {c["max_steps"] for c in pool} == {64} and len({c["learning_rate"] for c in pool}) == 5


def test_a_configuration_two_arms_chose_is_trained_once() -> None:
    budget = Budget(max_steps=8, max_seq_length=32)
    shared = {"rank": 8, "alpha": 16.0, "learning_rate": 1e-3, "batch_size": 8, "max_steps": None}
    plan = bench.Plan.of(
        "sst2",
        "knowledge-base",
        False,
        {"top3": [shared], "portfolio3": [{**shared, "epochs": 1.0}], "random": []},
        budget,
        13,
        "code-version",
    )
    assert plan.arms["top3"] == plan.arms["portfolio3"] and len(plan.configs) == 1
    (config,) = plan.configs.values()
    assert (config["max_steps"], config["epochs"], config["seed"]) == (8, None, 13)
    assert bench.Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_a_knowledge_base_without_a_budget_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    with pytest.raises(bench.BenchError, match=r"kb.jsonl: its header records no training budget"):
        bench.budget_of(KbFileHeader(provenance={"source": "platform"}), path)
    budget = bench.budget_of(read_kb_file(seed_path()).header, seed_path())
    assert bench.space_budget(budget).max_steps == budget["max_steps"]


def test_a_work_folder_serves_one_set_of_settings(tmp_path: Path) -> None:
    work = bench.Work(tmp_path / "work")
    work.root.mkdir()
    work.check_settings({"kb": "a", "random_k": 12})
    work.check_settings({"kb": "a", "random_k": 12})
    with pytest.raises(bench.BenchError, match=r"other settings \(random_k\)"):
        work.check_settings({"kb": "a", "random_k": 6})


# ---------------------------------------------------------------------------- end to end
def tiny_dataset(path: Path) -> None:
    words = {
        "pos": ["good", "great", "lovely", "fine", "superb", "nice"],
        "neg": ["bad", "awful", "poor", "dull", "grim", "nasty"],
    }
    rows = []
    for i in range(48):
        label = "pos" if i % 2 else "neg"
        rows.append(
            {"text": f"a {words[label][i % 6]} film, {words[label][i % 5]}", "label": label}
        )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def tiny_kb(path: Path) -> None:
    """The shipped seed's first 6 configurations on three of its datasets (a prior that fits in
    seconds), with a tiny budget in the header: the budget the bench trains at."""
    seed = read_kb_file(seed_path())
    names = sorted({run.dataset.name for run in seed.runs})[:3]
    runs = [
        r
        for r in seed.runs
        if r.dataset.name in names and r.seed == 13 and r.run_id.split(":")[2] < "c006"
    ]
    budget = {
        "train_rows": 36,
        "val_rows": 12,
        "max_steps": 2,
        "evaluations": 1,
        "max_seq_length": 32,
        "precision": "fp32",
    }
    header = KbFileHeader(provenance={**seed.header.provenance, "budget": budget})
    write_kb_file(path, header, runs)


def brain_bench(
    data: Path, kb: Path, work: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCH / "brain_bench.py"), "--data", str(data), "--kb", str(kb)]
    return subprocess.run(
        [
            *command,
            *("--work", str(work), "--random-k", "3", "--device", "cpu", "--budget", "kb"),
            *("--json", *options),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.mark.slow  # profiles, fits the recommender's prior and trains
def test_end_to_end_on_a_tiny_dataset_then_resumed_training_only_what_is_missing(
    tmp_path: Path,
) -> None:
    data, work, kb = tmp_path / "text", tmp_path / "work", tmp_path / "kb.jsonl"
    data.mkdir()
    tiny_dataset(data / "tiny_films.jsonl")
    tiny_kb(kb)
    first = brain_bench(data, kb, work, "--jobs", "2")  # two training processes at once
    assert first.returncode == 0, first.stderr[-3000:]
    report = json.loads(first.stdout)
    assert set(report) == REPORT_FIELDS
    (figures,) = report["datasets"]
    assert figures["dataset"] == "tiny_films" and figures["source"] == "knowledge-base"
    assert len(figures["top3"]) == len(figures["portfolio3"]) == len(figures["random_pool"]) == 3
    assert len(figures["random_k_expected_best"]) == 3 and figures["failed_runs"] == 0
    assert figures["best_all"] == max(
        figures["top3"] + figures["portfolio3"] + figures["random_pool"]
    )
    assert figures["regret_top3"] == pytest.approx(figures["best_all"] - figures["top3_best"])
    assert report["top3_vs_random_k"]["per_dataset"] == {"tiny_films": figures["top3_vs_random_k"]}
    assert report["train_seconds"] > 0 and set(report["load"]) >= {"avg_1m_start", "avg_1m_end"}
    assert report["budget"] == {"epochs": None, "max_steps": 2, "max_train_rows": 36}
    assert len(figures["top3_intervals"]) == 3 and all(figures["top3_intervals"])
    assert 0.0 <= report["interval_coverage"] <= 1.0 and report["interval_median_width"] > 0

    results = work / "runs.jsonl"
    runs = read_kb_file(results).runs
    plan = json.loads((work / "plans" / "tiny_films.json").read_text())
    assert sorted(run.run_id for run in runs) == sorted(plan["configs"])  # each config once
    for run in runs:
        assert run.steps == 2 and run.config["max_steps"] == 2 and run.config["seed"] == 13
        assert run.provenance.source == "brain-bench"
        assert run.dataset.n_train is not None and run.dataset.n_val is not None
        assert run.dataset.n_train + run.dataset.n_val == 48  # the header's 36 + 12 rows
    assert "superb" not in results.read_text()  # meta-features and results only, never text

    # a kill tears the last line: the restart trains that run again, and only that one
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    resumed = brain_bench(data, kb, work)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [run.run_id for run in read_kb_file(results).runs] == [run.run_id for run in runs]
    assert resumed.stderr.count("[1/1] tiny_films") == 1

    # nothing left: the third run trains nothing, and reports the same figures; a plan another
    # version of the recommender chose is chosen again (here the same configurations)
    settled = results.read_bytes()
    plan_path = work / "plans" / "tiny_films.json"
    plan_path.write_text(json.dumps({**plan, "recommender_code": "another-version"}))
    again = brain_bench(data, kb, work)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "planned again" in again.stderr
    assert json.loads(plan_path.read_text()) == plan
    assert plan["recommender_code"] == report["recommender_code"]
    assert results.read_bytes() == settled and "[1/" not in again.stderr
    assert json.loads(again.stdout)["datasets"] == json.loads(resumed.stdout)["datasets"]


@pytest.mark.slow  # builds the dataset's design, profiles, fits the prior and trains the top-3
def test_a_pool_from_the_knowledge_base_s_own_design_is_read_not_trained(tmp_path: Path) -> None:
    """``--random-pool kb``: the dataset's design runs that ``metatune kb build`` trained at the
    bench's budget are the random arm, read from the knowledge base; every configuration an arm
    shares with them is read too, and only the rest is trained."""
    from metatune_kb.adapters.build import BuildSettings, build

    data, work, kb, built = (tmp_path / n for n in ("text", "work", "kb.jsonl", "built.jsonl"))
    data.mkdir()
    tiny_dataset(data / "tiny_films.jsonl")
    tiny_kb(kb)
    design = BuildSettings(
        data_dir=data,
        out=built,
        work_dir=tmp_path / "build",
        configs=3,
        local_configs=1,
        train_rows=36,
        val_rows=12,
        max_steps=2,
        evaluations=1,
        max_seq_length=32,
        repeat_configs=1,
        repeat_seeds=(14,),
        repeat_datasets=1,
        precision="fp32",
        device="cpu",
        idle_seconds=0.0,
    )
    assert build(design).trained == 5  # 3 shared, 1 local, 1 repeat with another seed
    done = brain_bench(data, built, work, "--kb", str(kb), "--random-pool", "kb")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    (figures,) = report["datasets"]
    assert figures["left_out_of_kb"] and figures["source"] == "knowledge-base"
    by_id = {run.run_id.split(":", 2)[2]: run for run in read_kb_file(built).runs}
    design_metrics = sorted(by_id[f"{i}:s13"].metric for i in ("c000", "c001", "c002", "d000"))
    assert sorted(figures["random_pool"]) == design_metrics  # the repeat's seed left out
    plan = json.loads((work / "plans" / "tiny_films.json").read_text())
    assert set(plan["arms"]["random"]) <= set(plan["configs"])
    results = read_kb_file(work / "runs.jsonl").runs
    reused = [run for run in results if (run.provenance.note or "").startswith("read from ")]
    assert report["reused_runs"] == figures["reused_runs"] == len(reused) >= 4
    assert {run.run_id for run in reused} >= set(plan["arms"]["random"])
    trained = len(plan["configs"]) - len(reused)
    assert trained == 0 or f"[{trained}/{trained}] tiny_films" in done.stderr  # trained the rest
    assert report["random_pool"] == "kb"


def test_another_bench_on_the_same_work_folder_is_refused(tmp_path: Path) -> None:
    data, kb, work = tmp_path / "text", tmp_path / "kb.jsonl", tmp_path / "work"
    data.mkdir()
    tiny_dataset(data / "tiny_films.jsonl")
    tiny_kb(kb)
    with bench.Work(work).locked():
        done = brain_bench(data, kb, work)
    assert done.returncode == 2 and done.stdout == ""
    assert f"another brain_bench is running on {work}" in done.stderr
