"""Which fields hold the text, the optional second text of a pair task, and the label.

Names given in the submission win; otherwise the first field whose name (case-insensitive)
is in the candidate lists below. No guessing from content: a wrong guess profiles the wrong
column silently, while a clear error names the columns found and how to choose one.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from metatune.contracts import TaskType

from .errors import NoLabelColumn, NoPairColumn, NoTextColumn

TEXT_CANDIDATES = (
    "text",
    "sentence",
    "sentence1",
    "premise",
    "question",
    "question1",
    "text_a",
    "content",
    "document",
    "review",
    "tweet",
    "utterance",
    "input",
    "prompt",
    "body",
)
PAIR_CANDIDATES = ("text_pair", "sentence2", "hypothesis", "question2", "text_b")
LABEL_CANDIDATES = (
    "label",
    "labels",
    "class",
    "category",
    "target",
    "intent",
    "sentiment",
    "gold_label",
)


class ColumnRequest(BaseModel):
    """Column names from the submission (None: detect) and the task, if known."""

    model_config = ConfigDict(frozen=True)

    text: str | None = None
    text_pair: str | None = None
    label: str | None = None
    task: TaskType | None = None


class ColumnMap(BaseModel):
    """The resolved columns; ``label`` is None for causal-LM data."""

    model_config = ConfigDict(frozen=True)

    text: str
    text_pair: str | None = None
    label: str | None = None


def _named(fields: Sequence[str], wanted: str, role: str, error: type[Exception]) -> str:
    if wanted in fields:
        return wanted
    raise error(
        f"{role} column {wanted!r} is not in the dataset (columns: {', '.join(fields) or 'none'})"
    )


def _detect(fields: Sequence[str], candidates: Sequence[str]) -> str | None:
    by_lower = {name.lower(): name for name in fields}
    return next((by_lower[c] for c in candidates if c in by_lower), None)


def resolve_columns(fields: Sequence[str], request: ColumnRequest) -> ColumnMap:
    """Map ``fields`` (a header, JSON keys or a Parquet schema) to text / pair / label columns."""
    listed = ", ".join(fields) or "none"
    if request.text is not None:
        text = _named(fields, request.text, "text", NoTextColumn)
    else:
        detected = _detect(fields, TEXT_CANDIDATES)
        if detected is None:
            raise NoTextColumn(
                f"no text column: found {listed}; name one of {', '.join(TEXT_CANDIDATES)} or pass text_column"
            )
        text = detected

    task = request.task
    pair: str | None = None
    if request.text_pair is not None:
        pair = _named(fields, request.text_pair, "text_pair", NoPairColumn)
    elif task != TaskType.causal_lm:
        pair = _detect([f for f in fields if f != text], PAIR_CANDIDATES)
    if task == TaskType.pair_classification and pair is None:
        raise NoPairColumn(
            f"pair task without a second text column: found {listed}; pass text_pair_column"
        )

    label: str | None = None
    if task != TaskType.causal_lm:
        if request.label is not None:
            label = _named(fields, request.label, "label", NoLabelColumn)
        else:
            label = _detect([f for f in fields if f not in (text, pair)], LABEL_CANDIDATES)
        if label is None and task in (TaskType.classification, TaskType.pair_classification):
            raise NoLabelColumn(
                f"{task.value} needs a label column: found {listed}; name one of "
                f"{', '.join(LABEL_CANDIDATES)} or pass label_column"
            )
    return ColumnMap(text=text, text_pair=pair, label=label)
