"""Bounded-memory summaries of a row stream: a seeded reservoir sample and duplicate counting."""

from __future__ import annotations

import hashlib
import random
from array import array
from typing import Generic, TypeVar

import numpy as np

Item = TypeVar("Item")


class Reservoir(Generic[Item]):
    """Uniform sample of ``size`` items from a stream of unknown length (Vitter's algorithm R),
    reproducible for a given seed."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.items: list[Item] = []
        self.seen = 0
        self._random = random.Random(seed)

    def add(self, item: Item) -> None:
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append(item)
            return
        slot = self._random.randrange(self.seen)
        if slot < self.size:
            self.items[slot] = item


class DuplicateCounter:
    """Exact-duplicate rate from 64-bit BLAKE2b fingerprints of each example.

    Exact while at most ``max_fingerprints`` are stored (8 bytes each); beyond that only the
    fingerprints whose low ``level`` bits are zero are kept, a uniform sample of distinct
    examples in which every copy of a kept example is kept too, so the duplicate rate of the
    sample estimates that of the file without bias.
    """

    def __init__(self, max_fingerprints: int) -> None:
        self.max_fingerprints = max_fingerprints
        self.level = 0
        self.rows = 0
        self._fingerprints = array("Q")

    def add(self, text: str, text_pair: str | None) -> None:
        key = text if text_pair is None else f"{text}\x00{text_pair}"
        value = int.from_bytes(
            hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
        )
        self.rows += 1
        if value & ((1 << self.level) - 1):
            return
        self._fingerprints.append(value)
        if len(self._fingerprints) > self.max_fingerprints:
            self._compact()

    def _compact(self) -> None:
        while len(self._fingerprints) > self.max_fingerprints // 2:
            self.level += 1
            mask = np.uint64((1 << self.level) - 1)
            kept = np.frombuffer(self._fingerprints, dtype=np.uint64)
            kept = kept[(kept & mask) == 0]
            self._fingerprints = array("Q", kept.tobytes())

    def rate(self) -> float:
        """(examples - distinct examples) / examples."""
        if not self._fingerprints:
            return 0.0
        distinct = np.unique(np.frombuffer(self._fingerprints, dtype=np.uint64)).size
        return 1.0 - distinct / len(self._fingerprints)
