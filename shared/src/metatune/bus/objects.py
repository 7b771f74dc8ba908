"""NATS object store helpers for datasets, checkpoints and adapters (streamed in chunks)."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from nats.js import JetStreamContext
from nats.js.api import ObjectInfo
from nats.js.errors import BucketNotFoundError, NotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore as ObjectStoreBucket

from ..errors import ObjectNotFound
from ..integrity import sha256_of
from ..private_files import open_private


class ObjectStore:
    """Thin typed wrapper: files in and out of named buckets without loading them whole."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js

    async def put_file(self, bucket: str, key: str, path: Path) -> str:
        """Upload ``path``; returns its sha256."""
        store = await self._js.object_store(bucket)
        with open(path, "rb") as fh:
            await store.put(key, fh)
        return sha256_of(path)

    async def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        store = await self._js.object_store(bucket)
        await store.put(key, data)

    async def _readable(self, bucket: str, key: str) -> ObjectStoreBucket:
        """The bucket to read ``key`` from; a bucket never made (a tenant's before its first
        upload) holds no object: :class:`ObjectNotFound`."""
        try:
            return await self._js.object_store(bucket)
        except BucketNotFoundError as exc:
            raise ObjectNotFound(f"{bucket}/{key} is not in the object store") from exc

    async def get_to_file(self, bucket: str, key: str, path: Path) -> Path:
        store = await self._readable(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open_private(path) as fh:
                await store.get(key, writeinto=fh)
        except (ObjectNotFoundError, NotFoundError) as exc:
            path.unlink(missing_ok=True)
            raise ObjectNotFound(f"{bucket}/{key} is not in the object store") from exc
        return path

    async def get_bytes(self, bucket: str, key: str) -> bytes:
        store = await self._readable(bucket, key)
        try:
            result = await store.get(key)
        except (ObjectNotFoundError, NotFoundError) as exc:
            raise ObjectNotFound(f"{bucket}/{key} is not in the object store") from exc
        return result.data or b""

    async def size(self, bucket: str, key: str) -> int:
        """Size in bytes, without downloading (to refuse an oversized object up front)."""
        return int((await self._info(bucket, key)).size or 0)

    async def stat(self, bucket: str, key: str) -> tuple[int, str | None]:
        """Size in bytes and hex SHA-256 (from the object's digest, where it has one), without
        downloading: a dataset already in the store, named by its key."""
        info = await self._info(bucket, key)
        return int(info.size or 0), _hex_sha256(info.digest)

    async def _info(self, bucket: str, key: str) -> ObjectInfo:
        store = await self._readable(bucket, key)
        try:
            info = await store.get_info(key)
        except (ObjectNotFoundError, NotFoundError) as exc:
            raise ObjectNotFound(f"{bucket}/{key} is not in the object store") from exc
        if info.deleted:
            raise ObjectNotFound(f"{bucket}/{key} was deleted")
        return info

    async def delete(self, bucket: str, key: str) -> bool:
        """Remove ``key`` (a delete marker on its meta, its chunks purged); False when it was not
        there. The user needs the bucket's write grant (:func:`metatune.bus.auth.object_write`)."""
        store = await self._js.object_store(bucket)
        try:
            await store.delete(key)
        except (ObjectNotFoundError, NotFoundError):
            return False
        return True

    async def exists(self, bucket: str, key: str) -> bool:
        try:
            store = await self._readable(bucket, key)
        except ObjectNotFound:
            return False
        try:
            info = await store.get_info(key)
        except (ObjectNotFoundError, NotFoundError):
            return False
        return not info.deleted


def _hex_sha256(digest: str | None) -> str | None:
    """``SHA-256=<url-safe base64>`` (the object store's digest) as hex; None for any other."""
    if not digest or not digest.upper().startswith("SHA-256="):
        return None
    try:
        raw = base64.urlsafe_b64decode(digest.split("=", 1)[1])
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == 32 else None
