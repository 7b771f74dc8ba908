#!/usr/bin/env python
"""Write the recommender's cold-start portfolio from the shipped seed (never pasted by hand).

    .venv/bin/python scripts/cold_start_portfolio.py          # rewrite the generated block
    .venv/bin/python scripts/cold_start_portfolio.py --check  # exit 1 if the block differs

The block between ``# BEGIN GENERATED: portfolio`` and ``# END GENERATED: portfolio`` in
``metatune_recommender/domain/cold_start.py`` is the greedy portfolio
(``metatune_kb.domain.portfolio.greedy_portfolio``) of the recommender's shipped seed: each
entry's choices (everything but the run's budget: steps, epochs, length, seed, rows), in the
order the greedy search picked them. ``tests/recommender/test_cold_start_portfolio.py`` runs
the check, so a new seed without a regenerated portfolio fails the tests.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from metatune.contracts import LoraConfig
from metatune.knowledge.files import read_kb_file
from metatune_kb.domain.portfolio import greedy_portfolio
from metatune_recommender.adapters.flywheel import seed_path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "services/recommender/src/metatune_recommender/domain/cold_start.py"
SIZE = 5  # entries: a study's first trials come from these
# the tuple's fields, in order (the module's comment above the block names them)
CHOICES = (
    "rank",
    "alpha",
    "dropout",
    "target_modules",
    "learning_rate",
    "lr_schedule",
    "warmup_ratio",
    "weight_decay",
    "batch_size",
    "grad_accum_steps",
)
BUDGET = ("max_steps", "epochs", "max_seq_length", "max_train_rows", "seed")
NAMED_TARGETS = {  # target-module lists the module names as constants
    ("query", "key", "value", "attention.output.dense"): "ATTENTION",
    ("all-linear",): "ALL_LINEAR",
}
BLOCK = re.compile(
    r"(# BEGIN GENERATED: portfolio[^\n]*\n)(?P<body>.*?)(\s*# END GENERATED: portfolio)",
    re.DOTALL,
)


class PortfolioSourceError(Exception):
    """The seed or the module cannot give a generated portfolio (unknown field, no block)."""


def _field(name: str, value: Any) -> str:
    if name == "target_modules":
        if value is None:
            return "None"
        return NAMED_TARGETS.get(tuple(value), repr(list(value)))
    if name == "lr_schedule":
        return f"LrSchedule.{value}"
    return repr(value)


def entry_line(config: dict[str, Any]) -> str:
    """One entry as the module writes it: a tuple of the choices in ``CHOICES`` order."""
    unknown = set(config) - set(CHOICES) - set(BUDGET)
    if unknown or set(CHOICES) - set(config) - {"weight_decay", "grad_accum_steps"}:
        raise PortfolioSourceError(
            f"portfolio entry fields {sorted(config)} do not match the generated tuple {CHOICES}"
        )
    defaults = LoraConfig.model_fields
    values = [config.get(name, defaults[name].default) for name in CHOICES]
    return "    (" + ", ".join(_field(n, v) for n, v in zip(CHOICES, values, strict=True)) + "),"


def block_body(seed: Path) -> str:
    entries = greedy_portfolio(read_kb_file(seed).runs, SIZE)
    if len(entries) < SIZE:
        raise PortfolioSourceError(f"{seed.name}: only {len(entries)} portfolio entries")
    return "\n".join(["_ENTRIES = ["] + [entry_line(e.config) for e in entries] + ["]"])


def render(source: str, body: str) -> str:
    match = BLOCK.search(source)
    if match is None:
        raise PortfolioSourceError(f"{TARGET.name}: no '# BEGIN GENERATED: portfolio' block")
    return source[: match.start("body")] + body + source[match.end("body") :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the block differs")
    args = parser.parse_args(argv)
    try:
        current = TARGET.read_text()
        wanted = render(current, block_body(seed_path()))
    except PortfolioSourceError as exc:
        print(f"cold_start_portfolio: {exc}", file=sys.stderr)
        return 2
    if wanted == current:
        return 0
    if args.check:
        print(
            f"{TARGET.relative_to(ROOT)}: the portfolio differs from the seed's; "
            "run .venv/bin/python scripts/cold_start_portfolio.py",
            file=sys.stderr,
        )
        return 1
    TARGET.write_text(wanted)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
