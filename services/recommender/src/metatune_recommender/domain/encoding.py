"""Numeric inputs for the surrogate: configurations and task descriptors as standardised vectors.

Tables name the same hyperparameter differently (``initial_lr``, ``learning_rate``,
``initial_learning_rate``); :func:`canonical` maps names to one vocabulary by their words, so a
prior learned on one table speaks about another. Positive numeric values that span more than a
factor of 4 are log-transformed (learning rate, rank, batch size, dataset size...), then every
column is standardised over the history. A value a row lacks is the column's mean (0 after
standardising) plus a "missing" indicator column, so families with different spaces can share
one model. Strings, booleans and lists are one-hot over the values seen in at least
``min_category_count`` rows; identifiers (config ids, iterations, seeds) are dropped.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_ALIASES = (
    (re.compile(r"(^|_)(lr|learning_rate)$"), "learning_rate"),
    (re.compile(r"batch"), "batch_size"),
    (re.compile(r"drop_?out"), "dropout"),
    (re.compile(r"^(r|rank|lora_r)$"), "rank"),
    (re.compile(r"epoch"), "epochs"),
    (re.compile(r"warm_?up"), "warmup"),
    (re.compile(r"(^|_)layers$"), "layers"),
)
_IGNORED = re.compile(r"(^|_)(id|iteration|experiment|seed|file|index)$")
LOG_SPAN = 4.0


def canonical(name: str) -> str | None:
    """The shared name of a hyperparameter or descriptor; ``None`` for identifiers."""
    key = name.strip().lower()
    if _IGNORED.search(key):
        return None
    for pattern, alias in _ALIASES:
        if pattern.search(key):
            return alias
    return key


def _scalar(value: Any) -> float | str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def canonical_row(row: Mapping[str, Any]) -> dict[str, float | str]:
    out: dict[str, float | str] = {}
    for key, value in row.items():
        name = canonical(key)
        scalar = _scalar(value)
        if name is None or scalar is None or name in out:
            continue
        out[name] = scalar
    return out


@dataclass
class _Numeric:
    name: str
    log: bool
    mean: float
    std: float
    missing_column: bool


@dataclass
class Encoder:
    """Maps dict rows to vectors; fitted once on the rows the model learns from."""

    numeric: list[_Numeric] = field(default_factory=list)
    categorical: list[tuple[str, str]] = field(
        default_factory=list
    )  # (name, value) one-hot columns

    @classmethod
    def fit(
        cls,
        rows: Sequence[Mapping[str, Any]],
        *,
        min_category_count: int = 1,
        always_missing_column: bool = False,
    ) -> Encoder:
        canon = [canonical_row(r) for r in rows]
        numeric_values: dict[str, list[float]] = {}
        counts: Counter[tuple[str, str]] = Counter()
        for row in canon:
            for key, value in row.items():
                if isinstance(value, float):
                    numeric_values.setdefault(key, []).append(value)
                else:
                    counts[(key, value)] += 1
        numeric = []
        for key in sorted(numeric_values):
            values = np.asarray(numeric_values[key])
            log = bool(values.min() > 0 and values.max() / values.min() >= LOG_SPAN)
            transformed = np.log(values) if log else values
            std = float(transformed.std())
            missing = always_missing_column or len(values) < len(canon)
            if std == 0 and not missing:
                continue  # a constant column says nothing
            numeric.append(
                _Numeric(key, log, float(transformed.mean()), std if std > 0 else 1.0, missing)
            )
        categorical = sorted(
            key
            for key, n in counts.items()
            if n >= min_category_count and n < len(canon)  # one value in every row says nothing
        )
        return cls(numeric=numeric, categorical=categorical)

    @property
    def names(self) -> list[str]:
        names = []
        for col in self.numeric:
            names.append(f"log {col.name}" if col.log else col.name)
            if col.missing_column:
                names.append(f"{col.name} missing")
        names.extend(f"{k}={v}" for k, v in self.categorical)
        return names

    def columns_without(self, fields: Collection[str]) -> list[int]:
        """Indices of the columns that do not encode one of ``fields`` (canonical names): a
        value, its "missing" flag or one of its categories."""
        owners = []
        for col in self.numeric:
            owners.append(col.name)
            if col.missing_column:
                owners.append(col.name)
        owners.extend(name for name, _ in self.categorical)
        return [i for i, owner in enumerate(owners) if owner not in fields]

    @property
    def dim(self) -> int:
        return len(self.names)

    def transform(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        out = np.zeros((len(rows), self.dim))
        for i, raw in enumerate(rows):
            row = canonical_row(raw)
            j = 0
            for col in self.numeric:
                value = row.get(col.name)
                if isinstance(value, float) and (not col.log or value > 0):
                    x = math.log(value) if col.log else value
                    out[i, j] = (x - col.mean) / col.std
                    present = True
                else:
                    present = False
                j += 1
                if col.missing_column:
                    out[i, j] = 0.0 if present else 1.0
                    j += 1
            for name, value in self.categorical:
                out[i, j] = 1.0 if row.get(name) == value else 0.0
                j += 1
        return np.clip(out, -6.0, 6.0)
