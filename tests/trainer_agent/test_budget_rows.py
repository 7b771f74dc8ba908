"""The study budget's row cap, as the trainer applies it: a seeded sample of the training split,
the same for every trial, and an epoch budget counted over the rows left."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from metatune_trainer_agent.adapters.base_model import load_tokenizer
from metatune_trainer_agent.adapters.encoding_cache import encode_dataset
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.domain.encoding import cap_training_rows
from tests.support.builders import FAST_SITE, request_for

pytestmark = pytest.mark.slow  # a real LoRA run of MiniLM


def test_an_epoch_budget_runs_over_the_capped_rows_only(intents: Path) -> None:
    request = request_for(intents, max_steps=None, epochs=1.0, batch_size=8, max_train_rows=32)
    outcome = run_training(request, site=FAST_SITE)

    assert outcome.status == "completed"
    assert outcome.total_steps == math.ceil(1.0 * 32 / 8)  # 4 steps, where all 180 rows give 23


def test_the_sample_is_the_same_for_every_trial_and_keeps_the_validation_split(
    intents: Path,
) -> None:
    tokenizer, _ = load_tokenizer("all-MiniLM-L6-v2")
    whole = encode_dataset(request_for(intents), tokenizer)
    first = encode_dataset(request_for(intents, max_train_rows=50, seed=1), tokenizer)
    second = encode_dataset(request_for(intents, max_train_rows=50, seed=2), tokenizer)

    assert len(whole.train) > 50 and len(first.train) == 50
    assert first.train.ids.tolist() == second.train.ids.tolist()  # the seed does not move it
    assert first.val.ids.tolist() == whole.val.ids.tolist()  # validation is never cut
    assert cap_training_rows(whole, None) is whole and cap_training_rows(whole, 10**6) is whole
