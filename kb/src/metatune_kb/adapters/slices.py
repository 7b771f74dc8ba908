"""Affordable slices of the text datasets: the first rows of each (the shared files are shuffled),
split into train and validation by a ``split`` column the trainer honours."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from metatune.contracts import TaskType
from metatune.knowledge.errors import KnowledgeBaseError


class SliceError(KnowledgeBaseError, ValueError):
    """A dataset file that cannot be sliced for the build (missing, unreadable, too small)."""


@dataclass(frozen=True)
class DataSlice:
    name: str
    task: TaskType
    path: Path  # train + validation rows, with a ``split`` column
    train_path: Path  # train rows only: what the profiler describes
    n_train: int
    n_val: int
    majority_baseline: (
        float  # accuracy of predicting the train split's most common label on validation
    )


def _open(path: Path) -> IO[str]:
    return (
        gzip.open(path, "rt", encoding="utf-8")
        if path.suffix == ".gz"
        else path.open(encoding="utf-8")
    )


def dataset_name(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".jsonl")


def make_slice(source: Path, work_dir: Path, *, train_rows: int, val_rows: int) -> DataSlice:
    """Write the first ``train_rows + val_rows`` labelled rows of ``source`` as a train/validation file."""
    if not source.is_file():
        raise SliceError(f"{source} does not exist")
    rows: list[dict[str, str]] = []
    with _open(source) as handle:
        for line in handle:
            if len(rows) >= train_rows + val_rows:
                break
            line = line.strip()
            if not line:
                continue
            row = json.loads(line)
            if not row.get("text") or "label" not in row:
                continue
            rows.append(row)
    if len(rows) < 20:
        raise SliceError(f"{source} has {len(rows)} labelled rows; the build needs at least 20")
    # All the validation rows asked for when the file has them; a smaller file keeps at most a fifth
    n_val = (
        val_rows if len(rows) == train_rows + val_rows else min(val_rows, max(10, len(rows) // 5))
    )
    train, val = rows[: len(rows) - n_val], rows[len(rows) - n_val :]
    is_pair = any(row.get("text_pair") for row in rows)
    name = dataset_name(source)
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / f"{name}.jsonl"
    train_path = work_dir / f"{name}.train.jsonl"
    fields = ("text", "text_pair", "label") if is_pair else ("text", "label")
    with (
        path.open("w", encoding="utf-8") as both,
        train_path.open("w", encoding="utf-8") as only_train,
    ):
        for split, part in (("train", train), ("validation", val)):
            for row in part:
                record = {key: row.get(key, "") for key in fields}
                both.write(json.dumps({**record, "split": split}, ensure_ascii=False) + "\n")
                if split == "train":
                    only_train.write(json.dumps(record, ensure_ascii=False) + "\n")
    majority_label, _ = Counter(str(row["label"]) for row in train).most_common(1)[0]
    majority = sum(str(row["label"]) == majority_label for row in val) / len(val)
    task = TaskType.pair_classification if is_pair else TaskType.classification
    return DataSlice(name, task, path, train_path, len(train), len(val), majority)
