"""Security headers on every answer of the dashboard, its API and its redirects.

* ``Content-Security-Policy``: scripts only from this site (plotly.js, served here) and the one
  inline script that draws the charts (by its SHA-256); styles from this site and inline (plotly
  styles its charts inline); no plugins, no ``<base>``, forms only to this site, and no framing
  (``frame-ancestors 'none'``).
* ``X-Frame-Options: DENY`` for browsers that predate ``frame-ancestors`` (no clickjacking).
* ``Referrer-Policy: no-referrer``: a link followed from a page tells nothing of the page.
* ``X-Content-Type-Options: nosniff``: an answer is read only as its declared type.
"""

from __future__ import annotations

import base64
import hashlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..domain.pages import DRAW


def _script_hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        f"script-src 'self' {_script_hash(DRAW)}",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
)


class SecurityHeaders:
    """ASGI middleware: :data:`HEADERS` on every HTTP answer (pages, API, 401s, redirects)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = [*kept, *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


__all__ = ["CONTENT_SECURITY_POLICY", "HEADERS", "SecurityHeaders"]
