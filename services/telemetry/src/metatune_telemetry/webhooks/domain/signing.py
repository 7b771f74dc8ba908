"""Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
``{webhook-id}.{webhook-timestamp}.{body}`` with the base64 key of a ``whsec_`` secret, sent as
``webhook-signature: v1,<base64>``, computed by the ``standardwebhooks`` package (the reference
implementation). Receivers verify with any Standard Webhooks library.

Each endpoint (a webhook URL without credentials) may have secrets of its own. Rotating one adds
a secret and gives the ones before it a retirement time: until then every live secret signs (the
header carries one ``v1,<base64>`` per secret, space-separated, newest first), so receivers
verify with the old secret or the new one while they switch; after it only the new one signs. An
endpoint without secrets of its own is signed with the default secret."""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from standardwebhooks import Webhook

from metatune.errors import ConfigurationError

PREFIX = "whsec_"


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


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
    """``v1,<base64>``: the ``standardwebhooks`` package's signature of one delivery."""
    when = datetime.fromtimestamp(timestamp, UTC)
    return Webhook(secret_key(secret)).sign(message_id, when, body)


@dataclass(frozen=True)
class EndpointSecret:
    secret: str | None  # None: the default secret, signing on while its endpoint switches
    created_at: datetime
    retires_at: datetime | None = None  # None: live until the next rotation


def live_secrets(keys: Sequence[EndpointSecret], default: str, now: datetime) -> list[str]:
    """The secrets that sign a delivery to an endpoint at ``now``: its secrets not yet retired,
    newest first; the default where it has none."""
    live = sorted(
        (k for k in keys if k.retires_at is None or k.retires_at > now),
        key=lambda k: k.created_at,
        reverse=True,
    )
    return list(dict.fromkeys(k.secret or default for k in live)) or [default]


def headers(secrets: Sequence[str], message_id: str, timestamp: int, body: str) -> dict[str, str]:
    """The Standard Webhooks headers, signed with every one of ``secrets``."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            signature(secret, message_id, timestamp, body) for secret in secrets
        ),
        "content-type": "application/json",
    }
