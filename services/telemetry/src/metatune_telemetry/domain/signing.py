"""Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
``{webhook-id}.{webhook-timestamp}.{body}`` with the base64 key of a ``whsec_`` secret, sent as
``webhook-signature: v1,<base64>``. Receivers verify with any Standard Webhooks library."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from metatune.errors import ConfigurationError

PREFIX = "whsec_"


def new_secret() -> str:
    return PREFIX + base64.b64encode(os.urandom(32)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of ``secret``; ConfigurationError (never echoing it) when it is malformed."""
    try:
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) < 16:
        raise ConfigurationError(
            "METATUNE_WEBHOOK_SECRET must be whsec_ followed by base64 of at least 16 bytes"
        )
    return key


def signature(secret: str, message_id: str, timestamp: int, body: str) -> str:
    signed = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret: str, message_id: str, timestamp: int, body: str) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
        "content-type": "application/json",
    }
