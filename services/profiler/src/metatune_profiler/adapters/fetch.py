"""Bring a submitted dataset to a local file: NATS object store, local path or HTTP(S) URL.

Local paths must resolve under the data roots; URLs are off unless enabled, and then go only to
public addresses with every redirect re-checked (:mod:`metatune.inputs`). Downloads are streamed
to disk under the data directory and stop at the size limit, so a huge or endless response never
fills memory or disk, and a failed one leaves no partial file. A dataset whose submission names
its ``sha256`` is profiled only when the file has that digest (:mod:`metatune.integrity`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from metatune import integrity
from metatune.bus import ObjectStore
from metatune.contracts import DatasetLocation
from metatune.errors import DatasetDigestMismatch, DownloadFailed, InputNotAllowed, ObjectNotFound
from metatune.inputs import DownloadLimits, download, parse_networks, resolve_under_roots
from metatune.private_files import private_dir
from metatune.settings import Settings
from metatune.tenancy import DEFAULT_TENANT, datasets_bucket

from ..domain.errors import (
    FileTooLarge,
    ProfileDatasetNotFound,
    ProfileDigestMismatch,
    ProfileInputNotAllowed,
)


def _local_name(ref: str) -> str:
    """A unique file name that keeps the reference's suffixes (they name the format)."""
    name = PurePosixPath(urlparse(ref).path or ref).name
    suffixes = "".join(PurePosixPath(name).suffixes[-2:])
    return f"{uuid.uuid4().hex}{suffixes}"


def _too_large(size: int, limit: int) -> FileTooLarge:
    return FileTooLarge(
        f"the dataset is {size:,} bytes, over the limit of {limit:,}",
        details={"size_bytes": size, "limit_bytes": limit},
    )


class DatasetFetcher:
    def __init__(
        self, *, objects: ObjectStore | None, download_dir: Path, max_bytes: int, settings: Settings
    ) -> None:
        self._objects = objects
        self._dir, self._max_bytes, self._settings = download_dir, max_bytes, settings

    @asynccontextmanager
    async def local_file(
        self, location: DatasetLocation, tenant: str = DEFAULT_TENANT
    ) -> AsyncIterator[Path]:
        """The dataset as a local path for the duration of the block (downloads are deleted after),
        with the submitted digest where the submission names one."""
        if location.kind == "path":
            path = self._checked_path(location.ref)
            await _verify(path, location)
            yield path
            return
        private_dir(self._dir)
        target = self._dir / _local_name(location.ref)
        try:
            if location.kind == "object":
                await self._from_object_store(datasets_bucket(tenant), location.ref, target)
            else:
                await self._from_url(location.ref, target)
            await _verify(target, location)
            yield target
        finally:
            target.unlink(missing_ok=True)

    def _checked_path(self, ref: str) -> Path:
        try:
            path = resolve_under_roots(ref, self._settings.dataset_root_paths())
        except InputNotAllowed as exc:
            raise ProfileInputNotAllowed(str(exc)) from exc
        if not path.is_file():
            raise ProfileDatasetNotFound(f"no dataset file at {ref}")
        return path

    async def _from_object_store(self, bucket: str, key: str, target: Path) -> None:
        if self._objects is None:
            raise ProfileInputNotAllowed(
                "this profiler has no object store (not connected to NATS)"
            )
        try:
            size = await self._objects.size(bucket, key)
            if size > self._max_bytes:
                raise _too_large(size, self._max_bytes)
            await self._objects.get_to_file(bucket, key, target)
        except ObjectNotFound as exc:
            raise ProfileDatasetNotFound(str(exc)) from exc

    async def _from_url(self, url: str, target: Path) -> None:
        if not self._settings.allow_url_datasets:
            raise ProfileInputNotAllowed("URL datasets are disabled (METATUNE_ALLOW_URL_DATASETS)")
        limits = DownloadLimits(
            max_bytes=self._max_bytes,
            timeout_s=self._settings.url_timeout_s,
            allow=tuple(parse_networks(self._settings.url_allowed_networks)),
        )
        try:
            await download(url, target, limits)
        except InputNotAllowed as exc:
            raise ProfileInputNotAllowed(str(exc)) from exc
        except DownloadFailed as exc:
            if "over the limit" in str(exc):
                raise FileTooLarge(str(exc), details={"limit_bytes": self._max_bytes}) from exc
            raise ProfileDatasetNotFound(str(exc)) from exc


async def _verify(path: Path, location: DatasetLocation) -> None:
    try:
        await integrity.verify_location(path, location)
    except DatasetDigestMismatch as exc:
        raise ProfileDigestMismatch(str(exc)) from exc
