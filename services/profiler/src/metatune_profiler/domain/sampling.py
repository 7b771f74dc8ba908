"""Bounded-memory summaries of a row stream: a seeded reservoir sample and duplicate counting."""

from __future__ import annotations

import hashlib
import random
from array import array
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

Item = TypeVar("Item")
COMPACT_CHUNK = 1 << 18  # fingerprints tested at a time when compacting


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

    def add_many(self, count: int, make: Callable[[int], Item]) -> None:
        """``add(make(i))`` for i in range(count), calling ``make`` only for the items kept."""
        items, size, randrange = self.items, self.size, self._random.randrange
        seen = self.seen
        for i in range(count):
            seen += 1
            if len(items) < size:
                items.append(make(i))
                continue
            slot = randrange(seen)
            if slot < size:
                items[slot] = make(i)
        self.seen = seen


def fingerprints(texts: Sequence[str], pairs: Sequence[str] | None) -> np.ndarray:
    """The 64-bit BLAKE2b fingerprint of each example (text, or text and pair), as uint64."""
    keys = texts if pairs is None else [f"{t}\x00{p}" for t, p in zip(texts, pairs, strict=True)]
    blake2b = hashlib.blake2b
    return np.array(
        [
            int.from_bytes(
                blake2b(k.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
            )
            for k in keys
        ],
        dtype=np.uint64,
    )


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

    def add_many(self, texts: Sequence[str], pairs: Sequence[str] | None) -> None:
        """``add`` of each (text, pair), with the same fingerprints, sampling and compactions."""
        self.add_fingerprints(fingerprints(texts, pairs))

    def add_fingerprints(self, values: np.ndarray) -> None:
        """``add_many`` given the examples' :func:`fingerprints` (uint64)."""
        self.rows += values.size
        while values.size:
            kept = np.flatnonzero((values & np.uint64((1 << self.level) - 1)) == 0)
            room = self.max_fingerprints - len(self._fingerprints)  # appends before a compaction
            if kept.size <= room:
                self._fingerprints.frombytes(values[kept].tobytes())
                return
            self._fingerprints.frombytes(values[kept[: room + 1]].tobytes())
            self._compact()  # as add() does when the store first holds max_fingerprints + 1
            values = values[kept[room] + 1 :]

    def _compact(self) -> None:
        kept = np.frombuffer(self._fingerprints, dtype=np.uint64)
        while kept.size > self.max_fingerprints // 2:
            self.level += 1
            mask = np.uint64((1 << self.level) - 1)
            keep = np.empty(kept.size, dtype=bool)
            for start in range(0, kept.size, COMPACT_CHUNK):  # no full-size temporary
                chunk = kept[start : start + COMPACT_CHUNK]
                keep[start : start + COMPACT_CHUNK] = (chunk & mask) == 0
            kept = kept[keep]
        fingerprints = array("Q")
        fingerprints.frombytes(kept.data.cast("B"))  # no intermediate copy
        del kept  # releases the old array's buffer
        self._fingerprints = fingerprints

    def rate(self) -> float:
        """(examples - distinct examples) / examples."""
        if not self._fingerprints:
            return 0.0
        distinct = np.unique(np.frombuffer(self._fingerprints, dtype=np.uint64)).size
        return 1.0 - distinct / len(self._fingerprints)
