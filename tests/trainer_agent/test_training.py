"""Real LoRA fine-tuning of the embedded model on small slices of the team's datasets."""

from __future__ import annotations

import io
import json
import tarfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import torch

from metatune.clock import FixedClock
from metatune.contracts import TaskType
from metatune_trainer_agent.adapters.base_model import load_tokenizer
from metatune_trainer_agent.adapters.encoding_cache import _cache_path, _save, encode_dataset
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.domain.errors import CheckpointMismatch
from metatune_trainer_agent.domain.request import TrainOptions
from metatune_trainer_agent.domain.run import Control, RunHooks
from tests.support.builders import FAST_SITE, request_for

pytestmark = pytest.mark.slow  # real LoRA training runs of MiniLM


def test_training_lowers_validation_loss_and_packs_an_adapter(
    intents: Path, cache_dir: Path
) -> None:
    request = request_for(intents, cache=cache_dir, max_steps=24, batch_size=16)
    progress = []
    outcome = run_training(request, site=FAST_SITE, hooks=RunHooks(on_progress=progress.append))

    assert outcome.status == "completed" and outcome.step == 24
    assert outcome.initial_val_loss is not None and outcome.evaluation is not None
    assert outcome.evaluation.loss < outcome.initial_val_loss
    assert 0 <= outcome.evaluation.accuracy <= 1 and outcome.evaluation.macro_f1 is not None
    # useful tokens never exceed padded tokens; length grouping keeps padding small
    acc = outcome.accounting
    assert 0 < acc.tokens_seen <= acc.tokens_with_padding < 1.5 * acc.tokens_seen
    assert acc.energy_wh > 0 and acc.power_source in {"rapl", "model"}
    # the first event is the measured estimate, published before step 1
    assert progress[0].kind == "estimate" and progress[0].step == 0
    assert (
        progress[0].estimated_remaining_gpu_hours is not None
        and progress[0].estimated_remaining_gpu_hours > 0
    )
    with tarfile.open(fileobj=io.BytesIO(outcome.adapter), mode="r") as tar:
        names = set(tar.getnames())
    assert {"adapter_config.json", "adapter_model.safetensors", "metatune.json"} <= names
    labels = {json.loads(line)["label"] for line in intents.read_text().splitlines()}
    assert outcome.label_names == sorted(labels)  # every class of the slice, in a stable order


def test_pause_and_resume_on_a_second_agent_matches_a_straight_run(
    intents_binary: Path, cache_dir: Path
) -> None:

    request = request_for(intents_binary, cache=cache_dir, max_steps=20, dropout=0.1)
    straight = run_training(request, site=FAST_SITE)

    steps_seen: list[int] = []
    pause_at_10 = RunHooks(
        on_progress=lambda p: steps_seen.append(p.step),
        control=lambda: Control.pause if steps_seen and steps_seen[-1] >= 10 else None,
    )
    first = run_training(request, site=FAST_SITE, hooks=pause_at_10)
    assert first.status == "paused" and first.step == 10 and first.checkpoint
    # "a second agent": a fresh model, optimizer and data pipeline built from the checkpoint bytes alone
    second = run_training(request, site=FAST_SITE, resume_from=first.checkpoint)

    assert second.status == "completed" and second.step == 20
    assert second.train_loss == pytest.approx(straight.train_loss, abs=1e-5)
    assert second.evaluation.loss == pytest.approx(straight.evaluation.loss, abs=1e-5)
    assert [loss for _, loss in second.loss_history] == pytest.approx(
        [loss for step, loss in straight.loss_history if step > 10], abs=1e-5
    )
    # accounting continues across the pause instead of restarting
    assert second.accounting.tokens_seen == straight.accounting.tokens_seen
    assert second.accounting.tokens_with_padding == straight.accounting.tokens_with_padding


def test_a_checkpoint_of_another_configuration_is_refused(
    intents_binary: Path, cache_dir: Path
) -> None:
    request = request_for(intents_binary, cache=cache_dir, max_steps=3)
    paused = run_training(request, site=FAST_SITE, hooks=RunHooks(control=lambda: Control.pause))
    assert paused.status == "paused" and paused.step == 0
    other = request_for(intents_binary, cache=cache_dir, max_steps=3, rank=4)
    with pytest.raises(CheckpointMismatch):
        run_training(other, site=FAST_SITE, resume_from=paused.checkpoint)


def test_stop_ends_the_run_without_an_adapter(intents_binary: Path) -> None:
    outcome = run_training(
        request_for(intents_binary, max_steps=3),
        site=FAST_SITE,
        hooks=RunHooks(control=lambda: Control.stop),
    )
    assert outcome.status == "stopped" and outcome.adapter is None and outcome.checkpoint is None


def test_pair_classification_and_causal_lm_train(snli: Path, shakespeare: Path) -> None:
    pair = run_training(
        request_for(snli, TaskType.pair_classification, max_steps=2), site=FAST_SITE
    )
    assert pair.status == "completed" and len(pair.label_names) == 3
    assert pair.evaluation.accuracy is not None

    lm = run_training(
        request_for(shakespeare, TaskType.causal_lm, max_steps=6, learning_rate=5e-3),
        site=FAST_SITE,
    )
    assert lm.status == "completed" and lm.label_names == []
    assert lm.evaluation.perplexity is not None and lm.evaluation.accuracy is None
    assert lm.evaluation.loss < lm.initial_val_loss  # the fresh LM head is trained with the adapter


def test_tokenization_is_cached_and_keyed_by_what_changes_the_tensors(
    intents_binary: Path, cache_dir: Path
) -> None:
    tokenizer, _ = load_tokenizer("all-MiniLM-L6-v2")
    request = request_for(intents_binary, cache=cache_dir)
    first = encode_dataset(request, tokenizer)
    second = encode_dataset(request, tokenizer)
    assert not first.cache_hit and second.cache_hit
    assert torch.equal(first.train.ids, second.train.ids) and torch.equal(
        first.val.labels, second.val.labels
    )
    assert len(list(cache_dir.glob("*.pt"))) == 1
    longer = request.model_copy(
        update={"config": request.config.model_copy(update={"max_seq_length": 48})}
    )
    assert not encode_dataset(longer, tokenizer).cache_hit  # another max length is another entry
    assert len(list(cache_dir.glob("*.pt"))) == 2
    (cache_dir / next(cache_dir.glob("*.pt")).name).write_bytes(b"truncated")
    assert (
        encode_dataset(request, tokenizer).train.ids.numel() == first.train.ids.numel()
    )  # a broken entry is rebuilt


def test_trials_encoding_the_same_data_at_once_share_the_cache_safely(
    intents_binary: Path, cache_dir: Path
) -> None:
    """An agent runs a study's trials in parallel threads; they write the same cache entry at once."""
    tokenizer, _ = load_tokenizer("all-MiniLM-L6-v2")
    request = request_for(intents_binary, cache=cache_dir)
    dataset = encode_dataset(request, tokenizer)
    path = _cache_path(request, tokenizer)

    def write_often(_: int) -> None:
        for _ in range(20):
            _save(path, dataset)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write_often, range(4)))  # re-raises a failed rename
    assert encode_dataset(request, tokenizer).cache_hit
    assert [p.name for p in cache_dir.iterdir()] == [path.name]  # no temporary file left behind


def test_without_dynamic_padding_every_batch_is_padded_to_max_length(intents_binary: Path) -> None:
    request = request_for(intents_binary, max_steps=2)
    naive = request.model_copy(
        update={
            "options": TrainOptions(dynamic_padding=False, group_by_length=False, smoke_test=False)
        }
    )
    outcome = run_training(naive, site=FAST_SITE)
    assert outcome.accounting.tokens_with_padding == 2 * 8 * 32 > outcome.accounting.tokens_seen


def test_simulated_time_paces_steps_by_the_plan(intents_binary: Path) -> None:
    clock = FixedClock(datetime(2025, 3, 1, 10, 0, tzinfo=UTC))
    hour_of_step: dict[int, datetime] = {}

    def tick() -> None:  # each look at the controls moves simulated time on by 15 minutes
        clock.advance(timedelta(minutes=15))

    hooks = RunHooks(
        on_progress=lambda p: hour_of_step.setdefault(p.step, clock.current_hour()),
        control=lambda: tick(),
    )
    outcome = run_training(
        request_for(intents_binary, max_steps=4),
        site=FAST_SITE,
        clock=clock,
        hooks=hooks,
        planned_hours=2.0,
    )
    assert outcome.status == "completed" and outcome.step == 4
    steps_per_hour = Counter(hour for step, hour in hour_of_step.items() if step > 0)
    assert max(steps_per_hour.values()) <= 2  # 4 steps planned over 2 hours
    assert len(steps_per_hour) >= 2
    assert (
        len({h.hour for h in outcome.accounting.hours}) >= 2
    )  # energy charged to each simulated hour
