"""NATS connections: which credential a process presents, and a one-shot connect for the CLI.

:func:`client_auth` is the one place that turns settings into nats-py connect options, so every
service, the CLI and the health check authenticate the same way.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client

from ..errors import BusUnavailable
from ..redaction import redact_url
from ..settings import Settings
from .auth import ADMIN
from .credentials import NatsSecrets, inbox_prefix_of, public_key


async def _silent(_: Exception) -> None:
    return None


def client_auth(settings: Settings, user: str | None = None) -> dict[str, Any]:
    """Connect options for this process: its credential (:func:`client_credential`) and, when a
    CA is configured, TLS (:func:`client_tls`)."""
    return {**client_credential(settings, user), **client_tls(settings)}


def client_tls(settings: Settings) -> dict[str, Any]:
    """With ``METATUNE_NATS_TLS_CA_FILE``: a context that verifies the server against that CA (and
    presents ``METATUNE_NATS_TLS_CERT_FILE`` / ``_KEY_FILE`` when set). nats-py switches to TLS
    when the server requires it, so a server without TLS still accepts the same options."""
    if not settings.nats_tls_ca_file:
        return {}
    context = ssl.create_default_context(cafile=str(settings.nats_tls_ca_file))
    if settings.nats_tls_cert_file and settings.nats_tls_key_file:
        context.load_cert_chain(settings.nats_tls_cert_file, settings.nats_tls_key_file)
    return {"tls": context}


def client_credential(settings: Settings, user: str | None = None) -> dict[str, Any]:
    """The credential this process presents, first match wins:

    1. credentials in ``METATUNE_NATS_URL`` (``nats://user:pass@host``): nothing to add;
    2. ``METATUNE_NATS_NKEY_FILE``: that seed, with the inbox prefix its permissions allow;
    3. ``METATUNE_NATS_USER`` + ``METATUNE_NATS_PASSWORD_FILE``;
    4. ``user``'s credential in the local secrets directory, if ``metatune up`` wrote one
       (the CLI: ``admin``, ``submitter``; a service started by hand: its own name).

    A server without auth ignores whatever is presented (nats-py sends it only when asked)."""
    if urlsplit(settings.nats_url).username:
        return {}
    if settings.nats_nkey_file:
        return _nkey(settings.nats_nkey_file)
    if settings.nats_user and settings.nats_password_file:
        return {
            "user": settings.nats_user,
            "password": settings.nats_password_file.read_text().strip(),
        }
    if user:
        local = NatsSecrets(directory=settings.resolved_nats_secrets_dir())
        if user == ADMIN and local.password_file().is_file():
            return {"user": ADMIN, "password": local.admin_password()}
        if local.seed_file(user).is_file():
            return _nkey(local.seed_file(user))
    return {}


def _nkey(seed_file) -> dict[str, Any]:
    return {"nkeys_seed": str(seed_file), "inbox_prefix": inbox_prefix_of(public_key(seed_file))}


async def connect_once(url: str, timeout_s: float, **auth: Any) -> Client:
    """Connect or raise :class:`BusUnavailable` within about ``timeout_s`` (no reconnect loop)."""
    try:
        return await asyncio.wait_for(
            nats.connect(
                url,
                connect_timeout=timeout_s,
                max_reconnect_attempts=1,
                allow_reconnect=False,
                reconnect_time_wait=0,
                error_cb=_silent,
                **auth,
            ),
            timeout=timeout_s * 2 + 1,
        )
    except Exception as exc:
        raise BusUnavailable(redact_url(url), type(exc).__name__) from exc


async def connect_as(settings: Settings, user: str | None = None) -> Client:
    """:func:`connect_once` with this process's credential (see :func:`client_auth`)."""
    return await connect_once(
        settings.nats_url, settings.connect_timeout_s, **client_auth(settings, user)
    )
