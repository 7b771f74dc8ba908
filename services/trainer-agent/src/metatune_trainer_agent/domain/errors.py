"""Why a run cannot go on: each error carries the :class:`FailureReason` published in ``runs.failed``."""

from __future__ import annotations

from typing import ClassVar

from metatune.contracts import FailureReason
from metatune.errors import (
    DatasetDigestMismatch,
    DatasetNotFound,
    InputNotAllowed,
    MetaTuneError,
)
from metatune.models import UnknownBaseModel


class TrainingError(MetaTuneError):
    """A run stopped for a reason the submitter can act on."""

    reason: ClassVar[FailureReason] = FailureReason.internal


class TrainingUnknownBaseModel(TrainingError, UnknownBaseModel):
    """:class:`metatune.models.UnknownBaseModel` with the trainer's failure ``reason``."""

    reason = FailureReason.unknown_base_model


class InvalidTrainingConfig(TrainingError):
    reason = FailureReason.invalid_config


class TrainingDatasetNotFound(TrainingError, DatasetNotFound):
    """:class:`metatune.errors.DatasetNotFound` (absent or unreadable) with the trainer's
    failure ``reason``."""

    reason = FailureReason.dataset_missing


class TrainingDigestMismatch(TrainingError, DatasetDigestMismatch):
    """:class:`metatune.errors.DatasetDigestMismatch` (the dataset is not the one submitted) with
    the trainer's failure ``reason``."""

    reason = FailureReason.dataset_digest_mismatch


class TrainingInputNotAllowed(TrainingError, InputNotAllowed):
    """:class:`metatune.errors.InputNotAllowed` (a path outside the data roots, a URL the agent
    must not fetch) with the trainer's failure ``reason``."""

    reason = FailureReason.dataset_not_allowed


class EmptySplit(TrainingError):
    """The dataset has no usable rows for the split a run needs (train or validation)."""

    reason = FailureReason.empty_split


class SmokeTestFailed(TrainingError):
    reason = FailureReason.smoke_test_failed


class OutOfMemory(TrainingError):
    """Even a micro-batch of one example does not fit on the device."""

    reason = FailureReason.out_of_memory


class CheckpointMismatch(TrainingError):
    """A checkpoint was written by a different job configuration than the one resuming it."""

    reason = FailureReason.invalid_config
