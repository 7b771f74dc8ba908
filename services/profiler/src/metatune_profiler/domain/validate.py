"""A submission checked against its dataset before it is published: the checks profiling starts
with (the file is readable in its format, the named or detected columns are there), run on the
header / first record only, each problem one line naming the field it is about (the file is
opened by ``adapters.files.check_dataset``)."""

from __future__ import annotations

from .errors import NoLabelColumn, NoPairColumn, NoTextColumn, ProfileError

FIELDS: dict[str, str] = {
    NoTextColumn.code: "text_column",
    NoPairColumn.code: "text_pair_column",
    NoLabelColumn.code: "label_column",
}


def problem(exc: ProfileError) -> str:
    """``label_column: label column 'nope' is not in the dataset (columns: text, label)``."""
    return f"{FIELDS.get(exc.code, 'dataset')}: {exc.message}"
