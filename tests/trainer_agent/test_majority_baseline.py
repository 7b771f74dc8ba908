"""The majority-class baseline every run records: the training set's most common label, scored on
the validation labels."""

from __future__ import annotations

import torch

from metatune_trainer_agent.domain.encoding import EncodedDataset, EncodedSplit


def split(labels: list[int] | None) -> EncodedSplit:
    n = len(labels or [])
    return EncodedSplit(
        ids=torch.zeros(n, dtype=torch.int32),
        offsets=torch.arange(n + 1, dtype=torch.int64),
        type_ids=None,
        labels=None if labels is None else torch.tensor(labels, dtype=torch.int64),
    )


def dataset(train: list[int] | None, val: list[int] | None) -> EncodedDataset:
    return EncodedDataset(
        train=split(train),
        val=split(val),
        label_names=["a", "b", "c"],
        rows_skipped=0,
        split_source="hash",
    )


def test_majority_of_train_scored_on_val() -> None:
    # train's majority is label 2; validation holds it 1 time in 4, although validation's own majority is 0
    assert dataset([2, 2, 2, 0, 1], [0, 0, 0, 2]).majority_baseline == 0.25
    assert dataset([1, 1, 0], [1, 1, 1, 0, 0]).majority_baseline == 0.6


def test_no_baseline_without_labels_or_examples() -> None:
    assert dataset(None, None).majority_baseline is None
    assert dataset([0, 1], []).majority_baseline is None
