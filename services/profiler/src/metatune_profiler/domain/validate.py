"""A submission checked against its dataset before it is published: the checks profiling starts
with (the file is readable in its format, the named or detected columns are there), run on the
header / first record only, each problem one line naming the field it is about."""

from __future__ import annotations

from pathlib import Path

from .errors import NoLabelColumn, NoPairColumn, NoTextColumn, ProfileError
from .profile import ProfileOptions
from .reader import Dataset, ReadLimits

FIELDS: dict[str, str] = {
    NoTextColumn.code: "text_column",
    NoPairColumn.code: "text_pair_column",
    NoLabelColumn.code: "label_column",
}


def problem(exc: ProfileError) -> str:
    """``label_column: label column 'nope' is not in the dataset (columns: text, label)``."""
    return f"{FIELDS.get(exc.code, 'dataset')}: {exc.message}"


def check_dataset(path: Path, options: ProfileOptions) -> list[str]:
    """What profiling ``path`` with ``options`` would refuse at the start (empty: nothing)."""
    try:
        Dataset(
            path,
            options.columns,
            ReadLimits(options.max_file_bytes, options.max_row_bytes),
            options.format,
        )
    except ProfileError as exc:
        return [problem(exc)]
    return []
