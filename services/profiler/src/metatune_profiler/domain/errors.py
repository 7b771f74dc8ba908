"""Typed reasons a dataset cannot be profiled.

Each carries a machine-readable ``code`` (the ``ErrorEvent.code`` the service publishes) and,
where the problem sits on one row, its 1-based ``row`` number.
"""

from __future__ import annotations

from typing import ClassVar

from metatune.errors import (
    DatasetDigestMismatch,
    DatasetNotFound,
    InputNotAllowed,
    MetaTuneError,
)
from metatune.models import UnknownBaseModel


class ProfileError(MetaTuneError):
    """Base: the dataset (or the request) is unusable as submitted."""

    code: ClassVar[str] = "profile_failed"

    def __init__(
        self, message: str, *, row: int | None = None, details: dict[str, object] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.row = row
        self.details = details or {}


class NotUtf8(ProfileError):
    code = "not_utf8"


class EmptyDataset(ProfileError):
    code = "empty_file"


class NoTextColumn(ProfileError):
    code = "no_text_column"


class NoLabelColumn(ProfileError):
    code = "no_label_column"


class NoPairColumn(ProfileError):
    code = "no_pair_column"


class OneClassLabel(ProfileError):
    code = "one_class_label"


class RowTooLarge(ProfileError):
    code = "row_too_large"


class FileTooLarge(ProfileError):
    code = "file_too_large"


class MalformedRows(ProfileError):
    """Rows that do not parse (bad JSON, a CSV record with the wrong number of fields)."""

    code = "malformed_row"


class MissingValues(ProfileError):
    """Rows whose text or label cell is empty or null."""

    code = "missing_value"


class UnreadableDataset(ProfileError):
    """The file is not in the declared or detected format at all (e.g. a corrupt Parquet file)."""

    code = "unreadable_dataset"


class ProfileDatasetNotFound(ProfileError, DatasetNotFound):
    """:class:`metatune.errors.DatasetNotFound` with the profiler's error ``code``."""

    code = "dataset_not_found"


class ProfileDigestMismatch(ProfileError, DatasetDigestMismatch):
    """:class:`metatune.errors.DatasetDigestMismatch` (the dataset is not the one submitted) with
    the profiler's error ``code``."""

    code = "dataset_digest_mismatch"


class ProfileUnknownBaseModel(ProfileError, UnknownBaseModel):
    """:class:`metatune.models.UnknownBaseModel` with the profiler's error ``code``."""

    code = "unknown_base_model"


class ProfileInputNotAllowed(ProfileError, InputNotAllowed):
    """:class:`metatune.errors.InputNotAllowed` (a location kind this deployment does not accept,
    a path outside the data roots) with the profiler's error ``code``."""

    code = "location_not_allowed"


SKIP_REASON_ERRORS: dict[str, type[ProfileError]] = {
    cls.code: cls for cls in (NotUtf8, RowTooLarge, MalformedRows, MissingValues)
}
"""Row-level problems: a few such rows are skipped and reported; too many fail the file."""
