"""One webhook delivery attempt over HTTP, behind the SSRF guard.

The receiver's host is resolved and every address it resolves to must be public (loopback,
private, link-local, multicast, reserved and unspecified are refused unless a network is
allowed in ``METATUNE_WEBHOOK_ALLOWED_NETWORKS``); the connection is pinned to the checked
address, so DNS cannot change between check and connect. Redirects (307/308 keep the POST) are
followed at most :data:`MAX_REDIRECTS` times, each target checked again; only a 2xx answer counts
as delivered. URL credentials become a Basic ``Authorization`` header and appear in no message
this module returns (URLs in errors are redacted).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpx

from metatune.backoff import retry_after_s
from metatune.errors import DownloadFailed, InputNotAllowed
from metatune.inputs import Network, check_scheme, resolve_checked
from metatune.redaction import redact, url_without_credentials

MAX_REDIRECTS = 3
# httpx logs every request's full URL at INFO: a webhook URL's query may hold a token no redaction
# pattern knows, so only its warnings pass; deliveries are logged here, with the URL redacted
logging.getLogger("httpx").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status: int | None = None
    error: str | None = None
    retry_after_s: float | None = None
    permanent: bool = False  # retrying cannot help (the address is refused)


def _pinned(url: str, address: object) -> tuple[str, str]:
    parts = urlsplit(url)
    literal = f"[{address}]" if ":" in str(address) else str(address)
    netloc = literal + (f":{parts.port}" if parts.port else "")
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), host


def _basic_auth(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    if parts.username is None:
        return {}
    token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return {"authorization": "Basic " + base64.b64encode(token).decode()}


async def post(
    client: httpx.AsyncClient,
    url: str,
    body: str,
    headers: dict[str, str],
    allow: Sequence[Network],
    max_backoff_s: float,
) -> Outcome:
    """POST ``body`` to ``url`` once (following checked redirects)."""
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            scheme, host, port = check_scheme(current)
            address = await resolve_checked(host, port, allow)
        except InputNotAllowed as exc:
            return Outcome(False, error=f"refused: {redact(str(exc))}", permanent=True)
        except DownloadFailed as exc:  # the name does not resolve (now): may resolve later
            return Outcome(False, error=redact(str(exc)))
        pinned, host_header = _pinned(current, address)
        extensions = {"sni_hostname": host} if scheme == "https" else {}
        request = client.build_request(
            "POST",
            pinned,
            content=body.encode(),
            extensions=extensions,
            headers={**headers, **_basic_auth(current), "host": host_header},
        )
        try:
            response = await client.send(request)
        except httpx.TimeoutException:
            return Outcome(
                False, error=f"no answer from {url_without_credentials(current)} within the timeout"
            )
        except httpx.HTTPError as exc:
            return Outcome(
                False, error=f"{type(exc).__name__} talking to {url_without_credentials(current)}"
            )
        status = response.status_code
        if 200 <= status < 300:
            return Outcome(True, status)
        if response.is_redirect and response.headers.get("location"):
            current = urljoin(current, response.headers["location"])
            continue
        wait = retry_after_s(response.headers.get("retry-after"), datetime.now(UTC), max_backoff_s)
        return Outcome(
            False, status, f"HTTP {status} from {url_without_credentials(current)}", wait
        )
    return Outcome(
        False, None, f"more than {MAX_REDIRECTS} redirects from {url_without_credentials(url)}"
    )
