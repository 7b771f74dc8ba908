"""A dataset is used only when its content is the one its submission names.

``metatune submit`` records the uploaded file's SHA-256 in the submission
(``DatasetLocation.sha256``). Anyone with the datasets bucket's write grant (every submitter) can
replace an object after that, so the profiler and the trainer-agent hash what they fetched and
refuse a file whose digest differs (:class:`~metatune.errors.DatasetDigestMismatch`): a swapped
dataset is neither profiled nor trained, and no run of it reaches the knowledge base.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from .contracts import DatasetLocation
from .errors import DatasetDigestMismatch

CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of the file at ``path``, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str | None, what: str) -> None:
    """Raise :class:`DatasetDigestMismatch` (one line naming both digests) when ``expected`` is
    given and the file at ``path`` (``what``: the dataset's name in the message) has another."""
    if expected is None:
        return
    actual = sha256_of(path)
    if actual != expected:
        raise DatasetDigestMismatch(
            f"dataset digest mismatch: {what} has sha256 {actual}, the submission says "
            f"{expected}; it changed after submission and is not used"
        )


async def verify_location(path: Path, location: DatasetLocation) -> None:
    """:func:`verify_sha256` of the file fetched for ``location``, in a worker thread (hashing a
    large file would stall the caller's heartbeats and acks)."""
    what = f"{location.kind} {location.ref}"
    await asyncio.to_thread(verify_sha256, path, location.sha256, what)


def same_dataset(trained: str | None, profiled: str | None) -> bool:
    """Whether a run trained on the data its study was profiled on: the digest the agent verified
    equals the profiled one. Where the profile names no digest (a path or URL dataset submitted
    without one) there is nothing to compare and the run counts."""
    return profiled is None or trained == profiled


__all__ = ["same_dataset", "sha256_of", "verify_location", "verify_sha256"]
