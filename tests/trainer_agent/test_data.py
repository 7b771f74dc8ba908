"""Dataset reading, the held-out split and length-grouped batches."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from metatune.contracts import TaskType
from metatune_trainer_agent.adapters.dataset_files import load_examples
from metatune_trainer_agent.domain.batching import BatchPlan, Collator
from metatune_trainer_agent.domain.dataset import Examples, split_examples
from metatune_trainer_agent.domain.encoding import EncodedSplit
from metatune_trainer_agent.domain.errors import (
    EmptySplit,
    InvalidTrainingConfig,
    TrainingDatasetNotFound,
)

ROWS = [
    {"text": f"example number {i} " + "word " * (i % 7), "label": "pos" if i % 3 else "neg"}
    for i in range(30)
]


def write(path: Path, fmt: str) -> Path:
    if fmt == "jsonl.gz":
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in ROWS)
    elif fmt == "csv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=["text", "label"])
            writer.writeheader()
            writer.writerows(ROWS)
    elif fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(ROWS), path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl.gz", "csv", "parquet"])
def test_every_format_reads_the_same_examples(tmp_path: Path, fmt: str) -> None:
    examples = load_examples(write(tmp_path / f"d.{fmt}", fmt), TaskType.classification)
    assert examples.texts == [r["text"].strip() for r in ROWS]
    assert examples.labels == [r["label"] for r in ROWS]
    assert examples.label_names() == ["neg", "pos"]


def test_plain_text_is_one_lm_document_per_line(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("first line\n\nsecond line\n", encoding="utf-8")
    examples = load_examples(path, TaskType.causal_lm)
    assert examples.texts == ["first line", "second line"] and examples.labels is None


def test_rows_without_a_label_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(
        '{"text": "a", "label": "x"}\n{"text": "b"}\n{"text": "", "label": "y"}\n{"text": "c", "label": "y"}\n'
    )
    examples = load_examples(path, TaskType.classification)
    assert examples.texts == ["a", "c"] and examples.rows_skipped == 2


def test_held_out_split_is_deterministic_and_independent_of_row_order() -> None:
    texts = [f"text {i}" for i in range(200)]
    a = split_examples(Examples(texts=texts, labels=["x"] * 200), 0.1)
    b = split_examples(Examples(texts=texts[::-1], labels=["x"] * 200), 0.1)
    assert len(a.val) == 20 and len(a.train) == 180 and not set(a.val) & set(a.train)
    assert {texts[i] for i in a.val} == {texts[::-1][i] for i in b.val}


def test_a_split_column_is_respected(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [
        {
            "text": f"t{i}",
            "label": "a" if i % 2 else "b",
            "split": "validation" if i < 3 else "train",
        }
        for i in range(10)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    split = split_examples(load_examples(path, TaskType.classification), 0.5)
    assert split.source == "column" and split.val == [0, 1, 2] and split.train == list(range(3, 10))


def test_missing_dataset_missing_column_and_empty_split_are_typed(tmp_path: Path) -> None:
    with pytest.raises(TrainingDatasetNotFound):
        load_examples(tmp_path / "nope.jsonl", TaskType.classification)
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a", "label": "x"}\n')
    with pytest.raises(InvalidTrainingConfig, match="text pair"):
        load_examples(path, TaskType.pair_classification)
    with pytest.raises(EmptySplit):  # one row cannot be split into train and validation
        split_examples(load_examples(path, TaskType.classification), 0.1)
    only_test = tmp_path / "t.jsonl"
    only_test.write_text(
        '{"text": "a", "label": "x", "split": "test"}\n{"text": "b", "label": "y", "split": "test"}\n'
    )
    with pytest.raises(EmptySplit, match="no rows in split 'train'"):
        split_examples(load_examples(only_test, TaskType.classification), 0.1)
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(EmptySplit):
        load_examples(empty, TaskType.classification)


def lengths_split(lengths: list[int]) -> EncodedSplit:
    offsets = torch.cumsum(torch.tensor([0, *lengths]), 0)
    return EncodedSplit(
        ids=torch.arange(1, int(offsets[-1]) + 1, dtype=torch.int32) % 1000 + 1,
        offsets=offsets,
        type_ids=None,
        labels=torch.zeros(len(lengths), dtype=torch.int64),
    )


def test_each_epoch_visits_every_example_once_in_a_seeded_order() -> None:
    lengths = torch.randint(3, 60, (203,), generator=torch.Generator().manual_seed(1))
    plan = BatchPlan(lengths, 8, seed=13)
    epoch0 = plan.epoch(0)
    assert sorted(i for batch in epoch0 for i in batch) == list(range(203))
    assert epoch0 == BatchPlan(lengths, 8, seed=13).epoch(0)
    assert epoch0 != plan.epoch(1)


def test_length_grouping_and_dynamic_padding_cut_padding() -> None:
    lengths = torch.randint(3, 60, (400,), generator=torch.Generator().manual_seed(2))
    split = lengths_split(lengths.tolist())

    def padded(group: bool, dynamic: bool) -> int:
        collate = Collator(pad_id=0, max_length=64, dynamic=dynamic)
        plan = BatchPlan(lengths, 16, seed=0, group_by_length=group)
        return sum(collate(split, batch).tokens_with_padding for batch in plan.epoch(0))

    useful = int(lengths.sum())
    naive, dynamic, grouped = padded(False, False), padded(False, True), padded(True, True)
    assert naive == 400 * 64
    assert useful < grouped < dynamic < naive
    assert grouped < 1.1 * useful


def test_collator_masks_padding_out_of_the_lm_labels() -> None:
    split = lengths_split([3, 5])
    batch = Collator(pad_id=0, max_length=8, causal_lm=True, multiple_of=4)(split, [0, 1])
    assert batch.inputs["input_ids"].shape == (2, 8)
    assert batch.tokens == 8 and batch.tokens_with_padding == 16
    assert (batch.inputs["labels"] == -100).sum() == 8
