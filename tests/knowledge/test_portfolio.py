"""The greedy portfolio complements its entries instead of stacking near-copies of the best one."""

from __future__ import annotations

from metatune.knowledge.records import DatasetInfo, KbRun, Provenance, RunStatus
from metatune_kb.domain.portfolio import greedy_portfolio, normalised_scores


def run(
    dataset: str,
    lr: float,
    metric: float,
    *,
    seed: int = 13,
    status: RunStatus = RunStatus.completed,
) -> KbRun:
    return KbRun(
        run_id=f"{dataset}:{lr}:{seed}",
        dataset=DatasetInfo(name=dataset),
        base_model="m",
        task="classification",
        config={"learning_rate": lr, "rank": 8, "seed": seed},
        metric=metric,
        metric_name="accuracy",
        status=status,
        provenance=Provenance(source="test"),
    )


# Scores per dataset d0..d3 (already on a 0..1 scale, with a floor run at 0 so min-max keeps them):
# A wins on d0, d1; B wins on d2, d3; C is good everywhere; C2 is a near-copy of C.
TABLE = {
    1e-3: [1, 1, 0, 0],
    2e-3: [0, 0, 1, 1],
    3e-3: [0.8, 0.8, 0.8, 0.8],
    3.1e-3: [0.79, 0.79, 0.79, 0.79],
}


def runs() -> list[KbRun]:
    result = [run(f"d{d}", lr, scores[d]) for lr, scores in TABLE.items() for d in range(4)]
    return result + [run(f"d{d}", 1e-6, 0.0) for d in range(4)]


def test_scores_are_normalised_per_dataset_and_seeds_averaged() -> None:
    data = [
        *runs(),
        run("d0", 3e-3, 0.6, seed=14),
        run("d0", 9e-3, 0.0, status=RunStatus.failed),
    ]
    scores = normalised_scores(data)
    assert set(scores) == {"d0", "d1", "d2", "d3"}
    assert max(scores["d0"].values()) == 1.0 and min(scores["d0"].values()) == 0.0
    assert (
        len(scores["d0"]) == 5
    )  # the failed run is not a score; the two seeds of 3e-3 are one configuration
    c = next(v for k, v in scores["d0"].items() if '"learning_rate": 0.003,' in k)
    assert abs(c - 0.7) < 1e-9


def test_greedy_portfolio_takes_the_robust_one_then_complements_it() -> None:
    portfolio = greedy_portfolio(runs(), 3)
    lrs = [entry.config["learning_rate"] for entry in portfolio]
    assert lrs[0] == 3e-3  # best on average
    assert set(lrs[1:]) == {1e-3, 2e-3}  # not the near-copy 3.1e-3
    assert [round(e.portfolio_score, 3) for e in portfolio] == [0.8, 0.9, 1.0]
    assert "seed" not in portfolio[0].config
