"""A dataset's rows as examples, and a deterministic validation split.

The file is read by :mod:`metatune_trainer_agent.adapters.dataset_files` (JSON lines, CSV,
Parquet, plain text, each optionally gzip-compressed). A ``split`` column, when present, decides train and validation rows;
otherwise a content-hash split holds out ``val_fraction`` of the rows, so the same example
lands on the same side whatever the file order and however many trials read it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from metatune.contracts import TaskType

from .errors import EmptySplit, InvalidTrainingConfig

TEXT_COLUMNS = ("text", "sentence", "sentence1", "premise", "content", "document")
PAIR_COLUMNS = ("text_pair", "sentence2", "hypothesis")
LABEL_COLUMNS = ("label", "labels", "class", "target", "category")
SPLIT_COLUMN = "split"
TRAIN_SPLITS = {"train", "training"}
VAL_SPLITS = {"validation", "valid", "val", "dev"}


@dataclass(frozen=True)
class Examples:
    """Parallel columns of the usable rows (``pairs`` / ``labels`` are None where the task has none)."""

    texts: list[str]
    pairs: list[str] | None = None
    labels: list[str] | None = None
    splits: list[str] | None = None
    rows_skipped: int = 0

    def __len__(self) -> int:
        return len(self.texts)

    def label_names(self) -> list[str]:
        return sorted(set(self.labels or []))


@dataclass(frozen=True)
class Split:
    train: list[int]
    val: list[int]
    source: str = field(default="hash", compare=False)  # "column" or "hash"


def examples_from_rows(
    rows: list[dict[str, Any]],
    task: TaskType,
    source: str,
    *,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
) -> Examples:
    """The rows the task can use (a text, and a label for classification) of dataset ``source``."""
    if not rows:
        raise EmptySplit(f"dataset {source} has no rows")
    columns = set().union(*(row.keys() for row in rows[:1000]))
    text_col = _column(columns, text_column, TEXT_COLUMNS, "text")
    pair_col = None
    label_col = None
    if task == TaskType.pair_classification:
        pair_col = _column(columns, text_pair_column, PAIR_COLUMNS, "text pair")
    if task != TaskType.causal_lm:
        label_col = _column(columns, label_column, LABEL_COLUMNS, "label")
    split_col = SPLIT_COLUMN if SPLIT_COLUMN in columns else None

    texts: list[str] = []
    pairs: list[str] = []
    labels: list[str] = []
    splits: list[str] = []
    skipped = 0
    for row in rows:
        text = _as_text(row.get(text_col))
        pair = _as_text(row.get(pair_col)) if pair_col else ""
        label = _as_text(row.get(label_col)) if label_col else ""
        if not text or (pair_col and not pair) or (label_col and not label):
            skipped += 1
            continue
        texts.append(text)
        pairs.append(pair)
        labels.append(label)
        splits.append((_as_text(row.get(split_col)) or "train").lower() if split_col else "")
    if not texts:
        raise EmptySplit(
            f"dataset {source} has no usable rows ({skipped} rows lack a text or a label)"
        )
    return Examples(
        texts=texts,
        pairs=pairs if pair_col else None,
        labels=labels if label_col else None,
        splits=splits if split_col else None,
        rows_skipped=skipped,
    )


def split_examples(examples: Examples, val_fraction: float) -> Split:
    """Train and validation row indices; both non-empty or :class:`EmptySplit`."""
    if examples.splits is not None:
        train = [i for i, s in enumerate(examples.splits) if s in TRAIN_SPLITS]
        val = [i for i, s in enumerate(examples.splits) if s in VAL_SPLITS]
        if not train:
            raise EmptySplit(
                f"no rows in split 'train' (splits present: {sorted(set(examples.splits))})"
            )
        if val:
            return Split(train=train, val=val, source="column")
        return _hash_split(examples, train, val_fraction)
    return _hash_split(examples, list(range(len(examples))), val_fraction)


def _hash_split(examples: Examples, indices: list[int], val_fraction: float) -> Split:
    if len(indices) < 2:
        raise EmptySplit(
            f"{len(indices)} usable training row(s): need at least 2 to hold out a validation split"
        )
    n_val = min(len(indices) - 1, max(1, round(len(indices) * val_fraction)))

    def key(i: int) -> tuple[bytes, int]:
        content = examples.texts[i] + "\x1f" + (examples.pairs[i] if examples.pairs else "")
        return hashlib.blake2b(content.encode(), digest_size=8).digest(), i

    ranked = sorted(indices, key=key)
    val = sorted(ranked[:n_val])
    held = set(val)
    return Split(train=[i for i in indices if i not in held], val=val, source="hash")


def _column(columns: set[str], wanted: str | None, candidates: tuple[str, ...], what: str) -> str:
    """The ``what`` column: ``wanted`` if named, else the first of ``candidates`` present."""
    if wanted is not None:
        if wanted not in columns:
            raise InvalidTrainingConfig(
                f"{what} column {wanted!r} is not in the dataset (columns: {sorted(columns)})"
            )
        return wanted
    for name in candidates:
        if name in columns:
            return name
    raise InvalidTrainingConfig(
        f"no {what} column found (looked for {', '.join(candidates)}; columns: {sorted(columns)}); name it explicitly"
    )


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value.strip() if isinstance(value, str) else str(value)
