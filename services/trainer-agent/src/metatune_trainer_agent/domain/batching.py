"""Batches: a seeded, length-grouped order per epoch, and dynamic padding.

Grouping: shuffle the examples (seeded by run seed and epoch), cut the order into mega-batches
of ``group_factor`` batches, sort each mega-batch by length and cut it into batches, then
shuffle the batches. Batches hold sequences of similar length, so little padding is needed,
while the order stays random across the epoch. The order is a pure function of
``(seed, epoch)``, so a data position ``(epoch, batch)`` is enough to resume exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .encoding import EncodedSplit

IGNORE_INDEX = -100


class BatchPlan:
    def __init__(
        self,
        lengths: torch.Tensor,
        batch_size: int,
        *,
        seed: int,
        group_by_length: bool = True,
        group_factor: int = 50,
    ) -> None:
        self.lengths = lengths
        self.batch_size = batch_size
        self.seed = seed
        self.group_by_length = group_by_length
        self.group_factor = group_factor

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def epoch(self, epoch: int) -> list[list[int]]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        order = torch.randperm(len(self.lengths), generator=generator)
        if not self.group_by_length:
            return [chunk.tolist() for chunk in order.split(self.batch_size)]
        batches: list[list[int]] = []
        for mega in order.split(self.batch_size * self.group_factor):
            by_length = mega[torch.argsort(self.lengths[mega], descending=True, stable=True)]
            batches.extend(chunk.tolist() for chunk in by_length.split(self.batch_size))
        shuffled = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[i] for i in shuffled]

    def longest(self, count: int = 1) -> list[list[int]]:
        """The ``count`` batches with the longest sequences (for the smoke test and OOM probing)."""
        by_length = torch.argsort(self.lengths, descending=True, stable=True)
        return [chunk.tolist() for chunk in by_length.split(self.batch_size)[:count]]


@dataclass(frozen=True)
class Batch:
    inputs: dict[str, torch.Tensor]
    tokens: int  # useful tokens
    tokens_with_padding: int

    @property
    def size(self) -> int:
        return int(self.inputs["input_ids"].shape[0])

    def to(self, device: torch.device) -> Batch:
        moved = {k: v.to(device, non_blocking=True) for k, v in self.inputs.items()}
        return Batch(inputs=moved, tokens=self.tokens, tokens_with_padding=self.tokens_with_padding)


@dataclass(frozen=True)
class Collator:
    """Pads a list of examples into model inputs: to the batch's longest (dynamic) or to ``max_length``."""

    pad_id: int
    max_length: int
    dynamic: bool = True
    multiple_of: int = 1
    causal_lm: bool = False

    def __call__(self, split: EncodedSplit, indices: list[int]) -> Batch:
        examples = [split.example(i) for i in indices]
        longest = max(len(ids) for ids, _ in examples)
        width = longest if self.dynamic else self.max_length
        width = min(-(-width // self.multiple_of) * self.multiple_of, max(self.max_length, longest))
        input_ids = torch.full((len(examples), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(examples), width), dtype=torch.long)
        with_types = examples[0][1] is not None
        type_ids = torch.zeros((len(examples), width), dtype=torch.long) if with_types else None
        for row, (ids, types) in enumerate(examples):
            input_ids[row, : len(ids)] = ids
            attention[row, : len(ids)] = 1
            if type_ids is not None and types is not None:
                type_ids[row, : len(types)] = types
        inputs = {"input_ids": input_ids, "attention_mask": attention}
        if type_ids is not None:
            inputs["token_type_ids"] = type_ids
        if self.causal_lm:
            inputs["labels"] = input_ids.masked_fill(attention == 0, IGNORE_INDEX)
        elif split.labels is not None:
            inputs["labels"] = split.labels[indices]
        return Batch(
            inputs=inputs, tokens=int(attention.sum()), tokens_with_padding=int(input_ids.numel())
        )
