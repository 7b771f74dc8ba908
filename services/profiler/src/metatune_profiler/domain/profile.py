"""``profile_rows``: one dataset's rows in, its meta-features out.

The single implementation behind the service, the CLI and the knowledge-base builder, so a
new upload and a knowledge-base dataset are described by the same function. One streaming
pass computes every count exactly (examples, labels, word lengths, types, MATTR, duplicates,
scripts); tokenizer features come from a seeded reservoir sample of ``sample_size`` rows.

The pass reads the rows in column batches (``Dataset.batches``) and counts words as 64-bit ids
(``lexicon.word_ids``, ``TypeTable``). ``batched=False`` is the same profile computed one row
and one word string at a time, the reference the batched pass is tested (and benchmarked)
against. The file is opened and the tokenizer loaded by ``adapters.files.profile_file``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import NamedTuple, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from transformers import PreTrainedTokenizerBase

from metatune.contracts import DatasetFormat, MetaFeatures
from metatune.models import EMBEDDED_MODEL

from . import stats
from .block_counts import (
    BlockCounts,
    count_block,
    longest_row,
    words_and_scripts,
    words_per_example,
)
from .columns import ColumnMap, ColumnRequest
from .errors import SKIP_REASON_ERRORS, EmptyDataset, OneClassLabel, ProfileError
from .lexicon import Mattr, TypeCounter, TypeTable, WordIds, word_ids, words
from .probe import Encoder, probe_accuracy
from .rows import Row, RowBatch, Skip
from .sampling import DuplicateCounter, Reservoir
from .scripts import script_counts, script_mix
from .tokenizer import count_tokens, model_max_length
from .zipf import fit_discrete_power_law

BATCH_ROWS = 1024  # rows whose words are counted together (amortises numpy and Counter calls)
FIRST_ROWS_KEPT = 10  # row numbers remembered per skip reason


class ProfileOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    base_model: str = EMBEDDED_MODEL
    columns: ColumnRequest = ColumnRequest()
    format: DatasetFormat | None = None
    max_file_bytes: int = Field(2 * 1024**3, gt=0)
    max_row_bytes: int = Field(1024**2, gt=0)
    max_skipped_fraction: float = Field(
        0.1, ge=0, le=1, description="more bad rows than this fails the file"
    )
    sample_size: int = Field(4096, ge=1, description="reservoir rows behind tokenizer features")
    seed: int = 0
    mattr_window: int = Field(
        500, ge=1, description="tokens per MATTR window (Covington & McFall use 500)"
    )
    padding_batch_size: int = Field(32, ge=1)
    probe_rows: int = Field(
        300,
        ge=0,
        description="sampled rows the label probe is measured on (fewer labelled: no probe; 0: none)",
    )
    extra_batch_sizes: tuple[int, ...] = (8, 16, 64)
    max_types: int = Field(
        1_000_000, ge=1000, description="word types counted exactly before type sampling"
    )
    max_fingerprints: int = Field(
        4_000_000, ge=1000, description="example fingerprints kept for duplicates"
    )


class SkippedRows(BaseModel):
    count: int
    first_rows: list[int]


class ProfileResult(BaseModel):
    features: MetaFeatures
    format: DatasetFormat
    columns: ColumnMap
    base_model: str
    size_bytes: int
    rows_read: int = Field(description="rows seen, skipped ones included")
    rows_skipped: int
    skipped: dict[str, SkippedRows] = Field(default_factory=dict, description="per reason code")

    @property
    def skip_reasons(self) -> dict[str, int]:
        return {reason: s.count for reason, s in self.skipped.items()}


class _Pass:
    """Everything one streaming pass accumulates."""

    def __init__(self, options: ProfileOptions) -> None:
        self.types: TypeCounter | TypeTable = TypeCounter(options.max_types)
        self.mattr = Mattr(options.mattr_window)
        self.duplicates = DuplicateCounter(options.max_fingerprints)
        self.sample: Reservoir[Row] = Reservoir(options.sample_size, options.seed)
        self.labels: Counter[str] = Counter()
        self.word_lengths: Counter[int] = Counter()
        self.scripts = np.zeros(0, dtype=np.int64)
        self.skipped: dict[str, SkippedRows] = {}
        self.longest: Row | None = None
        self.examples = 0
        self._batch_tokens: list[str] = []
        self._batch_text: list[str] = []

    def add(self, row: Row) -> None:
        self.examples += 1
        tokens = words(row.text)
        if row.text_pair is not None:
            tokens += words(row.text_pair)
            self._batch_text.append(row.text_pair)
        self._batch_text.append(row.text)
        self._batch_tokens += tokens
        self.word_lengths[len(tokens)] += 1
        if row.label is not None:
            self.labels[row.label] += 1
        self.duplicates.add(row.text, row.text_pair)
        self.sample.add(row)
        if self.longest is None or _chars(row) > _chars(self.longest):
            self.longest = row
        if len(self._batch_text) >= BATCH_ROWS:
            self.flush()

    def skip(self, skip: Skip) -> None:
        entry = self.skipped.setdefault(skip.reason, SkippedRows(count=0, first_rows=[]))
        entry.count += 1
        if len(entry.first_rows) < FIRST_ROWS_KEPT:
            entry.first_rows.append(skip.row)

    def flush(self) -> None:
        assert isinstance(self.types, TypeCounter)
        self.types.update(self._batch_tokens)
        self.mattr.update(self._batch_tokens)
        self._add_scripts("".join(self._batch_text))
        self._batch_tokens, self._batch_text = [], []

    def _add_scripts(self, text: str) -> None:
        counts = script_counts(text)
        self.scripts = counts if not self.scripts.size else self.scripts + counts


class _Prepared(NamedTuple):
    """A batch with what can be computed from it alone (in the reading thread)."""

    batch: RowBatch
    words: WordIds
    scripts: np.ndarray


def _prepare(batch: RowBatch) -> _Prepared:
    return _Prepared(batch, *words_and_scripts(batch))


def _prepared(batches: Iterator[RowBatch]) -> Iterator[_Prepared]:
    """``_prepare`` of each batch, one batch ahead in a second thread: the JSON parser, the word
    split's numpy work and the accumulators' numpy work release the GIL, so two cores share them."""

    def read() -> _Prepared | None:
        batch = next(batches, None)
        return None if batch is None else _prepare(batch)

    with ThreadPoolExecutor(1, thread_name_prefix="profile-read") as pool:
        ahead = pool.submit(read)
        while (item := ahead.result()) is not None:
            ahead = pool.submit(read)
            yield item


class _BatchPass(_Pass):
    """The same accumulators fed a batch of rows at a time, words counted as ids."""

    def __init__(self, options: ProfileOptions) -> None:
        super().__init__(options)
        self.types = TypeTable(options.max_types)

    def add_batch(self, prepared: _Prepared) -> None:
        batch, found = prepared.batch, prepared.words
        for skip in batch.skips:
            self.skip(skip)
        texts, pairs, n = batch.texts, batch.pairs, len(batch.texts)
        if not n:
            return
        self.examples += n
        lengths, rows = np.unique(words_per_example(batch, found), return_counts=True)
        self.word_lengths.update(dict(zip(lengths.tolist(), rows.tolist(), strict=True)))
        if batch.labels is not None:
            self.labels.update(batch.labels)
        self.duplicates.add_many(texts, pairs)
        self.sample.add_many(n, batch.row)
        longest, chars = longest_row(batch)  # the first of the longest, as row by row
        if self.longest is None or chars > _chars(self.longest):
            self.longest = batch.row(longest)
        assert isinstance(self.types, TypeTable)
        self.types.update(found)
        self.mattr.update_ids(found.ids)
        self._add_block_scripts(prepared.scripts)

    def add_counts(self, counts: BlockCounts) -> None:
        """``add_batch`` of a block counted apart (:func:`~.block_counts.count_block`)."""
        for skip in counts.skips:
            self.skip(skip)
        n = counts.n
        if not n:
            return
        self.examples += n
        self.word_lengths.update(counts.word_lengths)
        self.labels.update(counts.label_counts)
        self.duplicates.add_fingerprints(counts.fingerprints)
        self.sample.add_many(n, counts.row)
        if self.longest is None or counts.longest_chars > _chars(self.longest):
            self.longest = counts.row(counts.longest)
        assert isinstance(self.types, TypeTable)
        self.types.add_types(
            counts.tokens, counts.type_ids, counts.type_counts, counts.type_crcs.__getitem__
        )
        self.mattr.add_block(
            counts.tokens, counts.mattr_head, counts.mattr_tail, counts.mattr_inner
        )
        self._add_block_scripts(counts.scripts)

    def _add_block_scripts(self, counts: np.ndarray) -> None:
        self.scripts = counts if not self.scripts.size else self.scripts + counts

    def flush(self) -> None:
        assert isinstance(self.types, TypeTable)
        self.types.update(word_ids([]))  # the type table's final check, as row by row
        if not self.scripts.size:
            self._add_scripts("")


def _chars(row: Row) -> int:
    return len(row.text) + (len(row.text_pair) if row.text_pair else 0)


def _check_skips(acc: _Pass, max_fraction: float) -> int:
    skipped = sum(s.count for s in acc.skipped.values())
    total = skipped + acc.examples
    if acc.examples == 0 and not skipped:
        raise EmptyDataset("the dataset has no rows")
    if skipped and (acc.examples == 0 or skipped / total > max_fraction):
        reason, worst = max(acc.skipped.items(), key=lambda item: item[1].count)
        error = SKIP_REASON_ERRORS[reason]
        breakdown = ", ".join(f"{s.count:,} {r}" for r, s in acc.skipped.items())
        raise error(
            f"{skipped:,} of {total:,} rows are unusable ({breakdown}), over the allowed "
            f"{max_fraction:.0%}; first {reason} at row {worst.first_rows[0]}",
            row=worst.first_rows[0],
            details={
                "rows_skipped": skipped,
                "rows_read": total,
                "skipped": {r: s.model_dump() for r, s in acc.skipped.items()},
            },
        )
    return skipped


PROGRESS_EVERY_ROWS = 5000


BlockMap = Callable[
    [Callable[[tuple[int, bytes | Skip]], BlockCounts], Iterator[tuple[int, bytes | Skip]]],
    Iterator[BlockCounts],
]
"""``map(count, blocks)`` in order, e.g. in worker processes (``adapters.block_pool``)."""


class RowSource(Protocol):
    """An opened dataset (:class:`metatune_profiler.adapters.reader.Dataset`): its format, resolved
    columns and size, and one pass over its rows, row by row, in column batches or, for JSON lines,
    in blocks of whole lines."""

    format: DatasetFormat
    columns: ColumnMap
    size_bytes: int

    def rows(self) -> Iterator[Row | Skip]: ...

    def batches(self) -> Iterator[RowBatch]: ...

    def jsonl_blocks(self) -> Iterator[tuple[int, bytes | Skip]]: ...


def profile_rows(
    dataset: RowSource,
    tokenizer: PreTrainedTokenizerBase,
    options: ProfileOptions,
    on_rows: Callable[[int], None] | None = None,
    *,
    encoder: Encoder,
    batched: bool = True,
    map_blocks: BlockMap | None = None,
) -> ProfileResult:
    """The profile of ``dataset``'s rows; raises a :class:`~.errors.ProfileError` subclass when
    they are unusable. ``on_rows(n)`` is told the rows read so far every few thousand rows. With
    ``map_blocks``, the blocks of a JSON-lines file are counted by it (e.g. in other processes)
    and merged in order: the same profile as without. ``batched=False`` computes it one row at a
    time with word strings: the reference the batched pass is tested against. ``encoder`` gives
    the base model's features of the rows the label probe reads (called only when it probes)."""
    acc: _Pass
    if batched and map_blocks is not None and dataset.format is DatasetFormat.jsonl:
        acc = batch_pass = _BatchPass(options)
        count = partial(
            count_block,
            max_row_bytes=options.max_row_bytes,
            columns=dataset.columns,
            window=options.mattr_window,
        )
        read = reported = 0
        for counts in map_blocks(count, dataset.jsonl_blocks()):
            batch_pass.add_counts(counts)
            read += counts.n + len(counts.skips)
            if on_rows is not None and read // PROGRESS_EVERY_ROWS > reported:
                reported = read // PROGRESS_EVERY_ROWS
                on_rows(read)
    elif batched:
        acc = batch_pass = _BatchPass(options)
        read = reported = 0
        for prepared in _prepared(dataset.batches()):
            batch_pass.add_batch(prepared)
            read += len(prepared.batch.texts) + len(prepared.batch.skips)
            if on_rows is not None and read // PROGRESS_EVERY_ROWS > reported:
                reported = read // PROGRESS_EVERY_ROWS
                on_rows(read)
    else:
        acc = _Pass(options)
        for read, item in enumerate(dataset.rows(), start=1):
            if isinstance(item, Row):
                acc.add(item)
            else:
                acc.skip(item)
            if on_rows is not None and read % PROGRESS_EVERY_ROWS == 0:
                on_rows(read)
    acc.flush()
    skipped = _check_skips(acc, options.max_skipped_fraction)
    if dataset.columns.label is not None and len(acc.labels) < 2:
        only = next(iter(acc.labels), "")
        raise OneClassLabel(
            f"label column {dataset.columns.label!r} has a single class ({only!r}): nothing to learn",
            details={"label": only, "rows": acc.examples},
        )

    features = _features(acc, dataset.columns, tokenizer, encoder, options)
    return ProfileResult(
        features=features,
        format=dataset.format,
        columns=dataset.columns,
        base_model=options.base_model,
        size_bytes=dataset.size_bytes,
        rows_read=acc.examples + skipped,
        rows_skipped=skipped,
        skipped=acc.skipped,
    )


def _features(
    acc: _Pass,
    columns: ColumnMap,
    tokenizer: PreTrainedTokenizerBase,
    encoder: Encoder,
    options: ProfileOptions,
) -> MetaFeatures:
    sample = acc.sample.items
    tokens = count_tokens(tokenizer, sample)
    longest = count_tokens(tokenizer, [acc.longest]).lengths[0] if acc.longest is not None else 0
    limit = model_max_length(tokenizer)
    fed = [min(n, limit) for n in tokens.lengths] if limit else tokens.lengths
    seed = options.seed
    padding = {
        b: (
            stats.padding_fraction_random(fed, b, seed),
            stats.padding_fraction_grouped(fed, b, seed),
        )
        for b in (options.padding_batch_size, *options.extra_batch_sizes)
    }
    ttr = acc.types.ttr()
    zipf = fit_discrete_power_law(acc.types.frequency_of_frequencies())
    extra: dict[str, float] = {
        "type_sample_rate": acc.types.sample_rate,
        "word_tokens": float(acc.types.tokens),
        "truncated_fraction": (sum(n > limit for n in tokens.lengths) / len(sample))
        if limit
        else 0.0,
    }
    if limit:
        extra["model_max_length"] = float(limit)
    for b, (random_pad, grouped_pad) in padding.items():
        extra[f"padding_random_b{b}"], extra[f"padding_grouped_b{b}"] = random_pad, grouped_pad
    if zipf is not None:
        extra.update(
            zipf_rank_exponent=zipf.rank_exponent, zipf_n_tail=float(zipf.n_tail), zipf_ks=zipf.ks
        )

    lengths = np.asarray(tokens.lengths, dtype=np.float64)
    labels = acc.labels
    return MetaFeatures(
        n_examples=acc.examples,
        n_classes=len(labels),
        label_entropy_bits=stats.label_entropy_bits(labels),
        label_entropy_norm=stats.normalised_entropy(labels),
        imbalance_ratio=stats.imbalance_ratio(labels),
        words_mean=stats.histogram_mean(acc.word_lengths),
        words_p50=stats.histogram_quantile(acc.word_lengths, 0.5),
        words_p95=stats.histogram_quantile(acc.word_lengths, 0.95),
        words_max=max(acc.word_lengths),
        tokens_mean=float(lengths.mean()),
        tokens_p50=float(np.percentile(lengths, 50)),
        tokens_p95=float(np.percentile(lengths, 95)),
        tokens_max=max(int(lengths.max()), longest),
        padding_fraction_random=padding[options.padding_batch_size][0],
        padding_fraction_grouped=padding[options.padding_batch_size][1],
        padding_batch_size=options.padding_batch_size,
        ttr=ttr,
        mattr=acc.mattr.value(ttr_if_short=ttr),
        mattr_window=acc.mattr.effective_window(),
        hapax_ratio=acc.types.hapax_ratio(),
        zipf_alpha=zipf.alpha if zipf else None,
        zipf_alpha_se=zipf.alpha_se if zipf else None,
        zipf_xmin=zipf.x_min if zipf else None,
        vocab_size=acc.types.vocab_size,
        unk_rate=tokens.unk_rate,
        fertility=tokens.fertility,
        duplicate_rate=acc.duplicates.rate(),
        script_mix=script_mix(acc.scripts),
        is_pair=columns.text_pair is not None,
        probe_accuracy=probe_accuracy(sample, options.probe_rows, encoder, seed)
        if options.probe_rows
        else None,
        sample_size=len(sample),
        extra=extra,
    )


__all__ = [
    "ProfileError",
    "ProfileOptions",
    "ProfileResult",
    "RowSource",
    "SkippedRows",
    "profile_rows",
]
