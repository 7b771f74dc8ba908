"""Bring an assigned dataset to a local file the trainer can read.

The agent checks locations again, whoever sent the assignment: local paths must resolve under
the data roots, URLs must be enabled and reach only public addresses (:mod:`metatune.inputs`).

A dataset whose submission names its ``sha256`` is used only when the file has that digest
(:func:`metatune.integrity.verify_sha256`): an object replaced after submission, by anyone with the
bucket's write grant, fails the run with ``dataset_digest_mismatch`` instead of training on it.

Object-store datasets are kept under the agent's data directory, named by the submitted digest
(verified before the file is kept; by the object's own digest where the submission names none),
so the trials of one study (and a resumed job) download a dataset once, and the tokenization cache
(keyed by file content) hits on the second trial. The files are 0600 in a 0700 folder
(:mod:`metatune.private_files`).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError, ObjectNotFoundError

from metatune.bus import ObjectStore
from metatune.contracts import DatasetLocation
from metatune.errors import DatasetDigestMismatch, DownloadFailed, InputNotAllowed, ObjectNotFound
from metatune.inputs import DownloadLimits, download, parse_networks, resolve_under_roots
from metatune.integrity import verify_location
from metatune.private_files import private_dir
from metatune.settings import Settings
from metatune.tenancy import DEFAULT_TENANT, datasets_bucket

from ..domain.errors import (
    TrainingDatasetNotFound,
    TrainingDigestMismatch,
    TrainingInputNotAllowed,
)


def _suffixes(ref: str) -> str:
    name = PurePosixPath(urlparse(ref).path or ref).name
    return "".join(PurePosixPath(name).suffixes[-2:])


class DatasetFetcher:
    def __init__(
        self,
        *,
        objects: ObjectStore,
        js: JetStreamContext,
        directory: Path,
        max_bytes: int,
        settings: Settings,
    ) -> None:
        self._objects, self._js, self._dir, self._max_bytes = objects, js, directory, max_bytes
        self._settings = settings

    async def local_path(self, location: DatasetLocation, tenant: str = DEFAULT_TENANT) -> Path:
        """The dataset as a local file with the submitted digest (where the submission names one)."""
        if location.kind == "path":
            try:
                path = resolve_under_roots(location.ref, self._settings.dataset_root_paths())
            except InputNotAllowed as exc:
                raise TrainingInputNotAllowed(str(exc)) from exc
            if not path.is_file():
                raise TrainingDatasetNotFound(f"no dataset file at {location.ref}")
            await _verify(path, location)
            return path
        private_dir(self._dir)
        if location.kind == "object":
            return await self._from_object_store(location, datasets_bucket(tenant))
        path = await self._from_url(location.ref)
        try:
            await _verify(path, location)
        except TrainingDigestMismatch:
            path.unlink(missing_ok=True)
            raise
        return path

    async def _from_object_store(self, location: DatasetLocation, bucket: str) -> Path:
        key = location.ref
        try:
            info = await (await self._js.object_store(bucket)).get_info(key)
        except (ObjectNotFoundError, NotFoundError) as exc:
            raise TrainingDatasetNotFound(f"{bucket}/{key} is not in the object store") from exc
        if info.size and info.size > self._max_bytes:
            raise TrainingDatasetNotFound(
                f"{bucket}/{key} is {info.size:,} bytes, over the limit of {self._max_bytes:,}"
            )
        # a file is kept only once verified: one named by the submitted digest is the submitted one
        name = location.sha256 or hashlib.sha256(f"{key}\0{info.digest}".encode()).hexdigest()[:24]
        target = self._dir / f"{name}{_suffixes(key)}"
        if target.is_file() and (location.sha256 or target.stat().st_size == info.size):
            return target
        partial = target.with_name(f"{target.name}.{uuid.uuid4().hex}.part")
        try:
            await self._objects.get_to_file(bucket, key, partial)
        except ObjectNotFound as exc:
            raise TrainingDatasetNotFound(str(exc)) from exc
        try:
            await _verify(partial, location)
        except TrainingDigestMismatch:
            partial.unlink()
            raise
        os.replace(partial, target)
        return target

    async def _from_url(self, url: str) -> Path:
        if not self._settings.allow_url_datasets:
            raise TrainingInputNotAllowed("URL datasets are disabled (METATUNE_ALLOW_URL_DATASETS)")
        target = self._dir / f"{hashlib.sha256(url.encode()).hexdigest()[:24]}{_suffixes(url)}"
        limits = DownloadLimits(
            max_bytes=self._max_bytes,
            timeout_s=self._settings.url_timeout_s,
            allow=tuple(parse_networks(self._settings.url_allowed_networks)),
        )
        try:
            return await download(url, target, limits)
        except InputNotAllowed as exc:
            raise TrainingInputNotAllowed(str(exc)) from exc
        except DownloadFailed as exc:
            raise TrainingDatasetNotFound(str(exc)) from exc


async def _verify(path: Path, location: DatasetLocation) -> None:
    try:
        await verify_location(path, location)
    except DatasetDigestMismatch as exc:
        raise TrainingDigestMismatch(str(exc)) from exc
