"""The label probe: a cheap classifier's cross-validated accuracy, the level a dataset's labels allow."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from metatune_profiler.adapters.encoder import ModelEncoder
from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain.columns import ColumnRequest
from metatune_profiler.domain.probe import probe_accuracy
from metatune_profiler.domain.profile import ProfileOptions
from metatune_profiler.domain.rows import Row

from .conftest import write_jsonl

WORDS = {
    "sport": ["goal", "match", "striker", "league", "coach", "referee", "stadium", "season"],
    "money": ["bank", "loan", "interest", "market", "shares", "budget", "profit", "tax"],
    "food": ["bread", "soup", "recipe", "oven", "spice", "garlic", "dinner", "flour"],
}
FILLER = ["the", "a", "today", "we", "saw", "about", "and", "with", "news", "on"]
ENCODER = ModelEncoder("all-MiniLM-L6-v2")


def _rows(n: int, *, informative: bool, seed: int = 0) -> list[Row]:
    """Three-class rows whose text names its class's words (``informative``) or words of a class
    drawn apart from the label (labels the text says nothing of)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = rng.choice(sorted(WORDS))
        topic = label if informative else rng.choice(sorted(WORDS))
        words = rng.sample(WORDS[topic], 3) + rng.sample(FILLER, 4)
        rng.shuffle(words)
        rows.append(Row(i, " ".join(words), None, label))
    return rows


def test_labels_the_text_names_probe_near_one_and_labels_it_ignores_near_chance() -> None:
    assert probe_accuracy(_rows(300, informative=True), 300, ENCODER) >= 0.95
    chance = probe_accuracy(_rows(300, informative=False), 300, ENCODER)
    assert chance is not None and chance <= 0.5  # three classes: a third by chance


def test_the_probe_is_reproducible_and_always_reads_n_rows() -> None:
    rows = _rows(400, informative=True)
    assert probe_accuracy(rows, 100, ENCODER, seed=3) == probe_accuracy(rows, 100, ENCODER, seed=3)
    probe = probe_accuracy(rows, 100, ENCODER)
    assert probe is not None and probe * 100 == pytest.approx(round(probe * 100))  # k of 100 rows
    assert (
        probe_accuracy(rows[:99], 100, ENCODER) is None
    )  # fewer rows than the size probes compare at


def test_no_probe_with_a_single_label_repeated_labels_or_none() -> None:
    one_label = [row._replace(label="sport") for row in _rows(100, informative=True)]
    assert probe_accuracy(one_label, 100, ENCODER) is None
    unique = [row._replace(label=f"id{row.row}") for row in _rows(100, informative=True)]
    assert probe_accuracy(unique, 100, ENCODER) is None
    unlabelled = [row._replace(label=None) for row in _rows(100, informative=True)]
    assert probe_accuracy(unlabelled, 100, ENCODER) is None


def test_the_profile_carries_the_probe_of_a_labelled_file_and_none_when_asked_for_none(
    tmp_path: Path,
) -> None:
    records = [
        {"text": row.text, "label": row.label} for row in _rows(400, informative=True, seed=1)
    ]
    path = write_jsonl(tmp_path / "topics.jsonl", records)
    columns = ColumnRequest(text="text", label="label")
    profiled = profile_file(path, ProfileOptions(columns=columns))
    assert profiled.features.probe_accuracy is not None
    assert profiled.features.probe_accuracy >= 0.9
    few = write_jsonl(tmp_path / "few.jsonl", records[:299])
    assert profile_file(few, ProfileOptions(columns=columns)).features.probe_accuracy is None
    off = profile_file(path, ProfileOptions(columns=columns, probe_rows=0))
    assert off.features.probe_accuracy is None
    text_only = write_jsonl(tmp_path / "text.jsonl", [{"text": r["text"]} for r in records])
    assert profile_file(text_only).features.probe_accuracy is None  # no labels: nothing to probe
