"""Webhook URLs whose credentials only telemetry can read.

A study's webhook URL may carry credentials: user info (``https://user:token@host/...``) or a token
in its query (``...?token=...``). They never travel on the bus. The submitter seals the whole URL
with telemetry's public key (a NaCl sealed box: X25519 and XSalsa20-Poly1305, anonymous sender)
and publishes only the URL without them (``StudySpec.webhook_url``: scheme, host, port, path)
beside the sealed box (``StudySpec.webhook_sealed``). Every copy of the spec (jobs.requested,
assignments, ``metatune events``) carries the same two; only telemetry, which holds the private
key, opens the box, stores the full URL in its database and delivers to it.

Keys: telemetry's private key lives in a file (``webhook_key_file``, default
``<data dir>/secrets/telemetry/webhook.key``, 0600) created on first use with its public key
beside it (``webhook.pub``). A submitter finds the public key there (the same machine, as with
``metatune up``) or in ``METATUNE_WEBHOOK_PUBLIC_KEY`` (``metatune webhooks public-key`` prints it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from nacl.encoding import Base64Encoder
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from .errors import ConfigurationError, MetaTuneError
from .redaction import url_without_credentials
from .settings import Settings


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries user info or a query (either may hold a token)."""
    parts = urlsplit(url)
    return bool(parts.username or parts.password or parts.query)


def seal(url: str, public_key: str) -> tuple[str, str]:
    """The URL without credentials, and the whole URL sealed for ``public_key`` (base64)."""
    box = SealedBox(PublicKey(public_key.encode(), encoder=Base64Encoder))
    return url_without_credentials(url), box.encrypt(url.encode(), encoder=Base64Encoder).decode()


class SealedWebhookUnreadable(MetaTuneError, ValueError):
    """A sealed webhook URL that this key cannot open (sealed for another telemetry, or damaged)."""


def unseal(sealed: str, private_key: PrivateKey) -> str:
    try:
        return SealedBox(private_key).decrypt(sealed.encode(), encoder=Base64Encoder).decode()
    except (CryptoError, ValueError, TypeError) as exc:
        raise SealedWebhookUnreadable(
            "the sealed webhook URL does not open with this telemetry's key"
        ) from exc


def key_file(settings: Settings) -> Path:
    return (
        settings.webhook_key_file
        or settings.resolved_data_dir() / "secrets" / "telemetry" / "webhook.key"
    )


def ensure_keypair(path: Path) -> PrivateKey:
    """Telemetry's private key from ``path``, created (0600, its public key beside it) if absent.
    Several processes may start at once: the key is written aside and linked into place, so
    exactly one is created and nobody reads half a file."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        aside = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(PrivateKey.generate().encode(encoder=Base64Encoder))
        try:
            os.link(aside, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            aside.unlink()
    key = PrivateKey(path.read_bytes().strip(), encoder=Base64Encoder)
    public = path.with_suffix(".pub")
    encoded = key.public_key.encode(encoder=Base64Encoder) + b"\n"
    if not public.exists() or public.read_bytes() != encoded:
        aside = public.with_name(f".{public.name}.{os.getpid()}")
        aside.write_bytes(encoded)
        aside.replace(public)
    return key


def public_key(settings: Settings) -> str | None:
    """Telemetry's public key: the setting, else the file beside its private key; None if neither."""
    if settings.webhook_public_key:
        return settings.webhook_public_key
    public = key_file(settings).with_suffix(".pub")
    return public.read_text().strip() if public.exists() else None


def seal_for_telemetry(url: str | None, settings: Settings) -> tuple[str | None, str | None]:
    """What a submission publishes for ``url``: the URL as is when it carries no credentials,
    else the URL without them and the sealed whole. Raises ConfigurationError (one line) when
    credentials must be sealed and no public key is known."""
    if url is None or not has_credentials(url):
        return url, None
    key = public_key(settings)
    if key is None:
        raise ConfigurationError(
            "the webhook URL carries credentials (user info or a query), which are sealed for "
            "telemetry and need its public key: set METATUNE_WEBHOOK_PUBLIC_KEY (`metatune "
            f"webhooks public-key` prints it) or submit where {key_file(settings)} exists"
        )
    try:
        return seal(url, key)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(
            "METATUNE_WEBHOOK_PUBLIC_KEY is not a base64 X25519 public key"
        ) from exc


def opener(settings: Settings) -> Callable[[str], str]:
    """Telemetry's way to open sealed webhook URLs (its key pair made on first use)."""
    key = ensure_keypair(key_file(settings))
    return lambda sealed: unseal(sealed, key)


def own_public_key(settings: Settings) -> str:
    """Telemetry's public key (not secret), its key pair made on first use: what submitters
    elsewhere set as METATUNE_WEBHOOK_PUBLIC_KEY."""
    path = key_file(settings)
    ensure_keypair(path)
    return path.with_suffix(".pub").read_text().strip()


def main() -> None:
    """``python -m metatune.webhook_seal``: print it, in telemetry's container (where the key file
    is; the image has no ``metatune`` CLI)."""
    settings = Settings()
    try:
        print(own_public_key(settings))
    except OSError as exc:  # a key file that cannot be read or made: one line, exit 1
        raise SystemExit(
            f"cannot read or make the key pair at {key_file(settings)}: {exc}"
        ) from None


if __name__ == "__main__":
    main()
