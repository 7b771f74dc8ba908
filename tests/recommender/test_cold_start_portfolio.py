"""The cold-start portfolio and the trainer's defaults are the shipped knowledge base's answer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from metatune.contracts import LoraConfig
from metatune.knowledge.files import read_kb_file
from metatune_kb.domain.portfolio import PortfolioEntry, greedy_portfolio
from metatune_recommender.adapters.flywheel import seed_path
from metatune_recommender.domain.cold_start import PORTFOLIO

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cold_start_portfolio.py"
BUDGET = ("max_steps", "epochs", "max_seq_length", "max_train_rows", "seed")


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    """``scripts/cold_start_portfolio.py`` is a script, not a package: loaded by path."""
    spec = importlib.util.spec_from_file_location("cold_start_portfolio", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["cold_start_portfolio"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def from_seed() -> list[PortfolioEntry]:
    return greedy_portfolio(read_kb_file(seed_path()).runs, len(PORTFOLIO))


def test_the_module_is_what_the_generator_writes(generator: ModuleType) -> None:
    assert generator.main(["--check"]) == 0


def test_an_edited_block_is_found(generator: ModuleType) -> None:
    source = generator.TARGET.read_text()
    body = generator.block_body(seed_path())
    edited = source.replace(body, body.replace("(8, 4.004", "(8, 4.5", 1))
    assert edited != source
    assert generator.render(edited, body) == source


def test_the_portfolio_is_the_seeds_greedy_portfolio(from_seed: list[PortfolioEntry]) -> None:
    shipped = [c.model_dump(mode="json", exclude=set(BUDGET)) for c in PORTFOLIO]
    derived = [
        LoraConfig(**entry.config).model_dump(mode="json", exclude=set(BUDGET))
        for entry in from_seed
    ]
    assert shipped == derived


def test_a_field_the_tuple_does_not_carry_is_refused(generator: ModuleType) -> None:
    with pytest.raises(generator.PortfolioSourceError, match="do not match"):
        generator.entry_line({**PORTFOLIO[0].model_dump(mode="json"), "new_knob": 1})


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
