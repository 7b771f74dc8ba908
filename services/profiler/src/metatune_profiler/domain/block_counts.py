"""What one block of JSON lines adds to every count of the profile pass, from the block alone.

``count_block`` parses a block of whole lines (``Dataset.jsonl_blocks``) and reduces it to small
arrays: the distinct word ids with their counts and CRC-32s, the first and last ``window - 1``
word ids and the MATTR windows lying wholly inside the block, the example fingerprints, the
script counts, the label counts, the word-length histogram and the longest row. It needs no
state from earlier blocks, so blocks can be counted in other processes; the profile pass merges
the results in file order (``_BatchPass.add_counts``), which gives exactly the profile of the
sequential pass: the type table, MATTR carry, duplicates and reservoir see the same values in
the same order. The rows themselves travel as UTF-8 blobs, decoded only for the rows the
reservoir keeps.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from .columns import ColumnMap
from .lexicon import WordIds, mattr_inner_sum, word_ids
from .rows import Row, RowBatch, Skip, parse_jsonl_block
from .sampling import fingerprints
from .scripts import script_counts


@dataclass(frozen=True)
class Strings:
    """A list of strings as one UTF-8 blob and offsets (pickles as two buffers)."""

    blob: bytes
    offsets: np.ndarray  # int64, one more than the strings

    @classmethod
    def of(cls, values: list[str]) -> Strings:
        encoded = [v.encode("utf-8", "surrogatepass") for v in values]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(
            np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:]
        )
        return cls(b"".join(encoded), offsets)

    def __getitem__(self, i: int) -> str:
        return self.blob[self.offsets[i] : self.offsets[i + 1]].decode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class BlockCounts:
    """The counts of one block (see the module's docstring)."""

    skips: list[Skip]
    numbers: np.ndarray  # the rows' line numbers
    texts: Strings
    pairs: Strings | None
    labels: Strings | None
    label_counts: Counter[str]  # in first-seen order, as a Counter fed row by row
    word_lengths: dict[int, int]  # words per example -> examples
    tokens: int  # words in the block
    type_ids: np.ndarray  # distinct word ids, sorted (uint64)
    type_counts: np.ndarray
    type_crcs: np.ndarray  # CRC-32 of each distinct word's UTF-8 (uint32)
    mattr_head: np.ndarray  # the first and the last window - 1 word ids
    mattr_tail: np.ndarray
    mattr_inner: int
    fingerprints: np.ndarray
    scripts: np.ndarray
    longest: int  # index of the first longest row (by characters), -1 when no row
    longest_chars: int

    @property
    def n(self) -> int:
        return int(self.numbers.size)

    def row(self, i: int) -> Row:
        return Row(
            int(self.numbers[i]),
            self.texts[i],
            self.pairs[i] if self.pairs is not None else None,
            self.labels[i] if self.labels is not None else None,
        )


def words_and_scripts(batch: RowBatch) -> tuple[WordIds, np.ndarray]:
    """The word ids of a batch's texts (text and pair interleaved) and their script counts."""
    texts, pairs = batch.texts, batch.pairs
    parts = texts if pairs is None else [x for pair in zip(texts, pairs, strict=True) for x in pair]
    return word_ids(parts), script_counts("\n".join(parts))  # newlines are whitespace, not counted


def words_per_example(batch: RowBatch, found: WordIds) -> np.ndarray:
    return found.counts if batch.pairs is None else found.counts[0::2] + found.counts[1::2]


def longest_row(batch: RowBatch) -> tuple[int, int]:
    """(index, characters) of the first longest row of a non-empty batch (text + pair)."""
    n = len(batch.texts)
    chars = np.fromiter(map(len, batch.texts), dtype=np.int64, count=n)
    if batch.pairs is not None:
        chars += np.fromiter(map(len, batch.pairs), dtype=np.int64, count=n)
    longest = int(np.argmax(chars))
    return longest, int(chars[longest])


def _distinct(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``ids`` (sorted), an index of one occurrence of each, and their counts
    (``np.unique`` without its stable sort: any occurrence of a word has the same CRC-32)."""
    order = np.argsort(ids)
    ordered = ids[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    counts = np.diff(np.append(starts, ids.size))
    return ordered[starts], order[starts], counts


def count_block(
    block: tuple[int, bytes | Skip], *, max_row_bytes: int, columns: ColumnMap, window: int
) -> BlockCounts:
    """The counts of the block ``(first line, bytes or Skip)`` with MATTR windows of ``window``."""
    batch = parse_jsonl_block(block[0], block[1], max_row_bytes, columns)
    found, scripts = words_and_scripts(batch)
    lengths, rows = np.unique(words_per_example(batch, found), return_counts=True)
    ids, first, counts = _distinct(found.ids)
    longest, chars = longest_row(batch) if batch.texts else (-1, 0)
    edge = window - 1
    return BlockCounts(
        skips=batch.skips,
        numbers=np.asarray(batch.numbers, dtype=np.int64),
        texts=Strings.of(batch.texts),
        pairs=Strings.of(batch.pairs) if batch.pairs is not None else None,
        labels=Strings.of(batch.labels) if batch.labels is not None else None,
        label_counts=Counter(batch.labels or ()),
        word_lengths=dict(zip(lengths.tolist(), rows.tolist(), strict=True)),
        tokens=int(found.ids.size),
        type_ids=ids,
        type_counts=counts,
        type_crcs=found.crc32s(first),
        mattr_head=found.ids[:edge],
        mattr_tail=found.ids[max(0, found.ids.size - edge) :] if edge else found.ids[:0],
        mattr_inner=mattr_inner_sum(found.ids, window),
        fingerprints=fingerprints(batch.texts, batch.pairs),
        scripts=scripts,
        longest=longest,
        longest_chars=chars,
    )
