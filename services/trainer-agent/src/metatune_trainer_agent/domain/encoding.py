"""Tokenize a dataset: encoded train / validation splits, and the key of their cache on disk
(written and read by :mod:`metatune_trainer_agent.adapters.encoding_cache`).

The cache key is the dataset file's sha256, the tokenizer's own serialisation, the maximum
sequence length, the task, the columns and the validation fraction, so a re-run (another
trial, a resumed job) reads tensors instead of tokenizing again, and any change that would
alter the tensors misses the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import torch

from .dataset import Examples, split_examples
from .request import TrainingRequest

CACHE_FORMAT = 1
_TOKENIZE_CHUNK = 1024


@dataclass(frozen=True)
class EncodedSplit:
    """Token ids of many examples, stored flat (one tensor + offsets) so they save and load fast."""

    ids: torch.Tensor  # int32, all examples concatenated
    offsets: torch.Tensor  # int64, n + 1
    type_ids: torch.Tensor | None  # int8, same layout as ids (pair tasks)
    labels: torch.Tensor | None  # int64, n (classification)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def example(self, i: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.ids[lo:hi], None if self.type_ids is None else self.type_ids[lo:hi]

    def take(self, indices: list[int]) -> EncodedSplit:
        parts = [self.example(i) for i in indices]
        lengths = torch.tensor([0] + [len(ids) for ids, _ in parts], dtype=torch.int64)
        return EncodedSplit(
            ids=torch.cat([ids for ids, _ in parts]) if parts else self.ids[:0],
            offsets=torch.cumsum(lengths, 0),
            type_ids=None
            if self.type_ids is None
            else torch.cat([t for _, t in parts if t is not None]),
            labels=None if self.labels is None else self.labels[indices],
        )

    def to_state(self) -> dict[str, Any]:
        return {
            "ids": self.ids,
            "offsets": self.offsets,
            "type_ids": self.type_ids,
            "labels": self.labels,
        }


@dataclass(frozen=True)
class EncodedDataset:
    train: EncodedSplit
    val: EncodedSplit
    label_names: list[str]
    rows_skipped: int
    split_source: str
    cache_hit: bool = False

    @property
    def majority_baseline(self) -> float | None:
        """Accuracy of always predicting the most common training label, on the validation split:
        the floor a classifier must beat (None without labels or validation examples)."""
        if (
            self.train.labels is None
            or self.val.labels is None
            or len(self.train) == 0
            or len(self.val) == 0
        ):
            return None
        majority = int(torch.bincount(self.train.labels).argmax())
        return int((self.val.labels == majority).sum()) / len(self.val)


ROW_SAMPLE_SEED = 0  # one sample of the training rows for every trial of a dataset


def cap_training_rows(dataset: EncodedDataset, max_rows: int | None) -> EncodedDataset:
    """``dataset`` with at most ``max_rows`` training rows: a seeded sample, in the split's order,
    the same whatever the trial's seed, so the trials of a study see the same rows."""
    if max_rows is None or len(dataset.train) <= max_rows:
        return dataset
    generator = torch.Generator().manual_seed(ROW_SAMPLE_SEED)
    sample = torch.randperm(len(dataset.train), generator=generator)[:max_rows]
    return dataclasses.replace(dataset, train=dataset.train.take(sorted(sample.tolist())))


def encode_examples(examples: Examples, tokenizer: Any, max_length: int) -> EncodedSplit:
    ids: list[int] = []
    type_ids: list[int] = []
    offsets = [0]
    with_types = examples.pairs is not None
    for start in range(0, len(examples), _TOKENIZE_CHUNK):
        texts = examples.texts[start : start + _TOKENIZE_CHUNK]
        pairs = examples.pairs[start : start + _TOKENIZE_CHUNK] if examples.pairs else None
        batch = tokenizer(
            texts,
            pairs,
            truncation="longest_first" if pairs else True,
            max_length=max_length,
            return_token_type_ids=with_types,
            return_attention_mask=False,
        )
        for k, row in enumerate(batch["input_ids"]):
            ids.extend(row)
            offsets.append(offsets[-1] + len(row))
            if with_types:
                type_ids.extend(batch["token_type_ids"][k])
    labels = None
    if examples.labels is not None:
        index = {name: i for i, name in enumerate(examples.label_names())}
        labels = torch.tensor([index[label] for label in examples.labels], dtype=torch.int64)
    return EncodedSplit(
        ids=torch.tensor(ids, dtype=torch.int32),
        offsets=torch.tensor(offsets, dtype=torch.int64),
        type_ids=torch.tensor(type_ids, dtype=torch.int8) if with_types else None,
        labels=labels,
    )


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A digest of everything that decides the token ids: the fast tokenizer's serialisation, less
    the truncation / padding state that calling it leaves behind (max length is keyed separately)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        body = json.dumps(spec, sort_keys=True)
    else:
        body = json.dumps(sorted(tokenizer.get_vocab().items())) + type(tokenizer).__name__
    return hashlib.sha256(body.encode()).hexdigest()


def cache_key(request: TrainingRequest, tokenizer: Any, file_digest: str) -> str:
    """The cache entry's name for ``request``'s dataset (whose sha256 is ``file_digest``)."""
    key = json.dumps(
        {
            "format": CACHE_FORMAT,
            "file": file_digest,
            "dataset_format": request.dataset_format,
            "tokenizer": tokenizer_fingerprint(tokenizer),
            "max_length": request.config.max_seq_length,
            "task": request.task,
            "columns": [request.text_column, request.text_pair_column, request.label_column],
            "val_fraction": request.options.val_fraction,
        },
        sort_keys=True,
    )
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def encoded_dataset(examples: Examples, tokenizer: Any, request: TrainingRequest) -> EncodedDataset:
    """``examples`` split (``val_fraction``) and tokenized (``max_seq_length``)."""
    split = split_examples(examples, request.options.val_fraction)
    encoded = encode_examples(examples, tokenizer, request.config.max_seq_length)
    return EncodedDataset(
        train=encoded.take(split.train),
        val=encoded.take(split.val),
        label_names=examples.label_names(),
        rows_skipped=examples.rows_skipped,
        split_source=split.source,
    )


def dataset_state(dataset: EncodedDataset) -> dict[str, Any]:
    """What the cache keeps of ``dataset`` (tensors and plain values: ``weights_only`` reads it)."""
    return {
        "format": CACHE_FORMAT,
        "train": dataset.train.to_state(),
        "val": dataset.val.to_state(),
        "label_names": dataset.label_names,
        "rows_skipped": dataset.rows_skipped,
        "split_source": dataset.split_source,
    }


def dataset_from_state(state: dict[str, Any], *, cache_hit: bool) -> EncodedDataset:
    return EncodedDataset(
        train=EncodedSplit(**state["train"]),
        val=EncodedSplit(**state["val"]),
        label_names=list(state["label_names"]),
        rows_skipped=int(state["rows_skipped"]),
        split_source=str(state["split_source"]),
        cache_hit=cache_hit,
    )
