"""The recommender bench reports each seed's figures and the recommender's margin over the
portfolio against the spread of its seeds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from .conftest import load_bench

bench = load_bench("recommender_bench")

SEED_KB = (
    Path(__file__).resolve().parents[2]
    / "services/recommender/src/metatune_recommender/data/seed_kb_v2.jsonl"
)


def outcome(regret_3: float, top3: float) -> object:
    return bench.Outcome(
        evals_top1=2.0,
        evals_top5=1.0,
        regret={k: (regret_3 if k == 3 else 0.0) for k in bench.REGRET_AT},
        top3_within2=top3,
    )


def report(name: str, **per_seed: list[object]) -> object:
    task = bench.TaskReport(name, 10, 1.0, [])
    task.per_seed = {"random": [outcome(0.5, 0.2)], **per_seed}
    task.outcomes = {method: bench.mean_outcome(runs) for method, runs in task.per_seed.items()}
    return task


def test_a_margin_inside_the_seeds_spread_is_not_beyond_it() -> None:
    reports = [
        report(
            "a",
            portfolio=[outcome(0.10, 0.0)],
            metatune=[outcome(0.00, 1.0), outcome(0.20, 0.0), outcome(0.05, 1.0)],
        ),
        report("b", portfolio=[outcome(0.0, 1.0)], metatune=[outcome(0.0, 1.0)] * 3),
    ]
    totals = bench.summary(reports, ["random", "portfolio", "metatune"])
    ours = totals["metatune"]
    assert ours["per_seed"]["regret_3"] == pytest.approx([0.0, 0.10, 0.025])
    assert ours["per_seed"]["top3_within_2pct_share"] == pytest.approx([1.0, 0.5, 1.0])
    assert ours["seed_spread"] == pytest.approx({"regret_3": 0.10, "top3_within_2pct_share": 0.5})
    assert totals["portfolio"]["seed_spread"] == {"regret_3": 0.0, "top3_within_2pct_share": 0.0}
    comparison = bench.versus_portfolio(totals)
    # nr@3 0.0417 against the portfolio's 0.05, share 5/6 against 1/2: both margins are inside
    # the spread of the recommender's seeds (0.1 and 0.5)
    assert comparison["margin"]["regret_3"] == pytest.approx(0.05 - 0.25 / 6)
    assert comparison["margin"]["top3_within_2pct_share"] == pytest.approx(5 / 6 - 1 / 2)
    assert comparison["beyond_spread"] == {"regret_3": False, "top3_within_2pct_share": False}


def test_a_margin_larger_than_the_spread_is_beyond_it() -> None:
    reports = [
        report("a", portfolio=[outcome(0.3, 0.0)], metatune=[outcome(0.0, 1.0)] * 2),
        report("b", portfolio=[outcome(0.0, 1.0)], metatune=[outcome(0.0, 1.0)] * 2),
    ]
    comparison = bench.versus_portfolio(bench.summary(reports, ["random", "portfolio", "metatune"]))
    assert comparison["margin"] == pytest.approx({"regret_3": 0.15, "top3_within_2pct_share": 0.5})
    assert comparison["beyond_spread"] == {"regret_3": True, "top3_within_2pct_share": True}


def test_the_best_row_ranks_first_among_its_ties() -> None:
    values = np.array([0.2, 0.9, 0.5, 0.9])
    assert bench.best_row_rank(values, np.array([3.0, 1.0, 2.0, 0.0])) == 3
    assert bench.best_row_rank(values, np.array([3.0, 1.0, 2.0, 2.5])) == 2
    assert bench.best_row_rank(values, np.array([1.0, 1.0, 1.0, 0.0])) == 1  # level counts for it


def test_the_knowledge_base_protocol_prints_each_seeds_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    arguments = ["--kb", str(SEED_KB), "--seeds", "2", "--tasks", "afrisenti_amh", "banking77"]
    arguments += ["--methods", "random", "portfolio", "metatune", "--prior-iterations", "20"]
    assert bench.main([*arguments, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    ours = figures["methods"]["metatune"]
    assert len(ours["per_seed"]["regret_3"]) == 2
    assert np.mean(ours["per_seed"]["regret_3"]) == pytest.approx(ours["regret"]["3"])
    assert np.mean(ours["per_seed"]["top3_within_2pct_share"]) == pytest.approx(
        ours["top3_within_2pct_share"]
    )
    assert len(figures["methods"]["portfolio"]["per_seed"]["regret_3"]) == 1
    for task in figures["tasks"]:
        assert len(task["best_row_rank"]["portfolio"]) == 1
        for signal in ("prior_mean", "learned_mean", "best_single_history_task"):
            assert len(task["best_row_rank"][signal]) == 2
            assert all(1 <= rank <= task["rows"] for rank in task["best_row_rank"][signal])
    comparison = figures["metatune_vs_portfolio"]
    assert comparison["seed_spread"] == ours["seed_spread"]
    assert comparison["margin"]["regret_3"] == pytest.approx(
        figures["methods"]["portfolio"]["regret"]["3"] - ours["regret"]["3"]
    )


def test_an_unreadable_history_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_kb = tmp_path / "runs.jsonl"
    not_a_kb.write_text('{"kind": "something else"}\n', encoding="utf-8")
    for arguments in (["--kb", str(not_a_kb)], ["--train", str(tmp_path)]):
        with pytest.raises(SystemExit) as stop:
            bench.main(arguments)
        assert stop.value.code == 2
    errors = capsys.readouterr().err
    assert "not a MetaTune knowledge-base file" in errors
    assert f"{tmp_path}: no tasks.csv" in errors
