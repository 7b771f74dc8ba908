"""The cold-start portfolio and the trainer's defaults are the shipped knowledge base's answer."""

from __future__ import annotations

import pytest

from metatune.contracts import LoraConfig
from metatune.knowledge.files import read_kb_file
from metatune.knowledge.portfolio import PortfolioEntry, greedy_portfolio
from metatune_recommender.adapters.flywheel import seed_path
from metatune_recommender.domain.cold_start import PORTFOLIO

BUDGET = ("max_steps", "epochs", "max_seq_length", "seed")  # the seed's budget, not the choice


@pytest.fixture(scope="module")
def from_seed() -> list[PortfolioEntry]:
    return greedy_portfolio(read_kb_file(seed_path()).runs, len(PORTFOLIO))


def test_the_portfolio_is_the_seeds_greedy_portfolio(from_seed: list[PortfolioEntry]) -> None:
    shipped = [c.model_dump(mode="json", exclude=set(BUDGET)) for c in PORTFOLIO]
    derived = [
        LoraConfig(**entry.config).model_dump(mode="json", exclude=set(BUDGET))
        for entry in from_seed
    ]
    assert shipped == derived


def test_the_trainers_defaults_are_the_portfolios_first_entry(
    from_seed: list[PortfolioEntry],
) -> None:
    default, best = LoraConfig(), LoraConfig(**from_seed[0].config)
    assert (default.rank, default.lr_schedule, default.batch_size) == (
        best.rank,
        best.lr_schedule,
        best.batch_size,
    )
    for field in ("alpha", "dropout", "learning_rate", "warmup_ratio"):
        assert getattr(default, field) == pytest.approx(getattr(best, field), rel=0.05), field
    # the default targets stay the model's own attention projections (None), which every
    # architecture peft knows has; the seed's "attention" set names BERT's modules
    assert default.target_modules is None
