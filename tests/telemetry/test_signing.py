"""The signature header, byte for byte: one ``v1,<base64 HMAC-SHA256>`` of
``{id}.{timestamp}.{body}`` per live secret, space-separated, in the order given."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from metatune.errors import ConfigurationError
from metatune_telemetry.webhooks.domain.signing import headers, new_secret, secret_key


def test_headers_carry_one_standard_signature_per_secret_in_order() -> None:
    old, new = new_secret(), new_secret()
    body = '{"type": "study.completed", "note": "é"}'
    signed = f"msg_1.1700000000.{body}".encode()

    def expected(secret: str) -> str:
        digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
        return "v1," + base64.b64encode(digest).decode()

    assert headers([new, old], "msg_1", 1700000000, body) == {
        "webhook-id": "msg_1",
        "webhook-timestamp": "1700000000",
        "webhook-signature": f"{expected(new)} {expected(old)}",
        "content-type": "application/json",
    }


@pytest.mark.parametrize("key", ["", "c2hvcnQ=", "not base64!"])
def test_a_malformed_secret_is_refused_without_being_echoed(key: str) -> None:
    with pytest.raises(ConfigurationError, match="METATUNE_WEBHOOK_SECRET") as raised:
        headers(["whsec_" + key], "msg_1", 1700000000, "{}")
    assert not key or key not in str(raised.value)
