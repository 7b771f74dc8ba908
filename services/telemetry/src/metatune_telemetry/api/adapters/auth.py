"""Read-only token authentication of the dashboard, its read API, ``/metrics`` and
``/openapi.json`` (``/healthz`` stays open).

The tokens are the ones ``metatune secrets`` writes (:mod:`metatune.dashboard_tokens`: the
current one, and after a rotation the previous one until its overlap ends), read again on every
request so a rotation applies without a restart. A request is let in with:

* ``Authorization: Bearer <token>`` (scripts, Prometheus' ``authorization.credentials_file``);
* ``?token=<token>`` once, from a browser: the answer is a redirect to the same URL without it
  that sets an HttpOnly, SameSite=Strict cookie, so the token leaves the address bar and history;
* that cookie afterwards.

Every comparison is constant-time (:func:`hmac.compare_digest`, against every valid token).

Whose token it is decides what the request sees (:class:`Viewer`, in ``request.state.viewer``):
the admin's (``dashboard.token``) every study; a tenant's (``tenants/<tenant>/dashboard.token``,
written by ``metatune secrets --tenant``) only its own studies, their jobs and deliveries, and
neither ``/metrics`` nor the platform's totals.

Secure by default: telemetry listening on a non-loopback address requires the tokens
(:func:`require_tokens` refuses to build the app without them). On a loopback address with no
``dashboard.token`` written yet the dashboard stays open, as it was before tokens existed
(``metatune up``, the demo and the tests run so); once the file exists, tokens are required there
too. No token is ever logged or echoed in an answer.
"""

from __future__ import annotations

import hmac
import html
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

from starlette.datastructures import URL, Headers, QueryParams
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from metatune.dashboard_tokens import TOKEN_FILE, read_tokens, tenant_token_dirs, tokens_dir
from metatune.errors import ConfigurationError

from ...settings import TelemetrySettings

COOKIE = "metatune_dashboard"
QUERY = "token"
OPEN_PATHS = frozenset({"/healthz"})
CHALLENGE = 'Bearer realm="metatune-telemetry"'


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who a request reads as: the admin (``tenant`` None: every study) or one tenant."""

    tenant: str | None = None

    @property
    def admin(self) -> bool:
        return self.tenant is None

    def sees(self, tenant: str | None) -> bool:
        """Whether a study of ``tenant`` (None: no such study) is shown to this viewer."""
        return self.admin or (tenant is not None and tenant == self.tenant)


ADMIN_VIEWER = Viewer()
Valid = list[tuple[bytes, Viewer]]


@dataclass(frozen=True, slots=True)
class TokenGate:
    """Which tokens let a request in now, and as whom; ``open`` when no token is needed
    (loopback, none written)."""

    directory: Path
    loopback: bool
    now: Callable[[], datetime]

    def tokens(self) -> Valid | None:
        """The tokens valid now, each with its viewer; None when no token is required."""
        found = read_tokens(self.directory)
        if found is None:
            return None if self.loopback else []  # off loopback: nothing lets anyone in
        now = self.now()
        valid = [(t.encode(), ADMIN_VIEWER) for t in found.valid(now)]
        for tenant, folder in tenant_token_dirs(self.directory).items():
            theirs = read_tokens(folder)
            if theirs is not None:
                valid += [(t.encode(), Viewer(tenant)) for t in theirs.valid(now)]
        return valid

    @staticmethod
    def accepts(candidate: str, valid: Valid) -> Viewer | None:
        """The viewer whose token ``candidate`` is (None: no valid token)."""
        given = candidate.encode()
        matched: Viewer | None = None
        for token, viewer in valid:  # every one compared, whichever matches
            if hmac.compare_digest(given, token):
                matched = viewer
        return matched


def require_tokens(settings: TelemetrySettings, now: Callable[[], datetime]) -> TokenGate:
    """The gate of the telemetry HTTP app; refuses (``ConfigurationError``) a non-loopback
    ``telemetry_http_host`` without a ``dashboard.token``."""
    directory = tokens_dir(settings)
    gate = TokenGate(directory, is_loopback(settings.telemetry_http_host), now)
    if not gate.loopback and read_tokens(directory) is None:
        raise ConfigurationError(
            f"telemetry listens on {settings.telemetry_http_host}, not loopback, and "
            f"{directory / TOKEN_FILE} does not exist: run `metatune secrets` "
            "(or set METATUNE_DASHBOARD_TOKENS_DIR)"
        )
    return gate


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _cookie(headers: Headers) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # an unparsable Cookie header carries no token of ours
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


HOW = (
    "send Authorization: Bearer <token>, or open the page once with ?token=<token> (the "
    "dashboard.token `metatune secrets` wrote)"
)
MISSING = f"a dashboard token is required: {HOW}"
NOT_VALID = f"the dashboard token given is not valid (mistyped, or rotated past its overlap): {HOW}"
REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MetaTune dashboard: token needed</title></head>
<body><h1>MetaTune dashboard</h1><p>{message}</p>
<form method="get" action="{path}"><label>Token <input name="{query}" type="password"
autocomplete="off" required></label> <button type="submit">Open</button></form></body></html>
"""


def wants_html(headers: Headers) -> bool:
    """A browser (its Accept names text/html) gets a page; an API client (``*/*``,
    ``application/json``) gets JSON."""
    return "text/html" in headers.get("accept", "").lower()


def _refused(headers: Headers, path: str, *, given: bool) -> Response:
    """401 with what went wrong: no token, or one that is not valid (never "required" when one
    was sent); a page with a token field for a browser, ``{"error": ...}`` for an API client."""
    message = NOT_VALID if given else MISSING
    challenge = {"WWW-Authenticate": CHALLENGE}
    if wants_html(headers):
        page = REFUSED_PAGE.format(
            message=html.escape(message), path=html.escape(same_site(path)), query=QUERY
        )
        return HTMLResponse(page, status_code=401, headers=challenge)
    return JSONResponse({"error": message}, status_code=401, headers=challenge)


def same_site(path: str) -> str:
    """``path`` as a redirect target on this site: one leading slash. A browser reads
    ``//host/...`` (and ``/\\host/...``) as another site's address: an open redirect."""
    return "/" + path.lstrip("/\\")


class TokenAuth:
    """ASGI middleware: every HTTP request but :data:`OPEN_PATHS` shows a valid token."""

    def __init__(self, app: ASGIApp, gate: TokenGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        valid = self.gate.tokens()
        if valid is None:
            scope.setdefault("state", {})["viewer"] = ADMIN_VIEWER
            await self.app(scope, receive, send)
            return
        headers, url = Headers(scope=scope), URL(scope=scope)
        query = QueryParams(scope["query_string"])
        if (given := query.get(QUERY)) is not None:
            if self.gate.accepts(given, valid) is None:
                await _refused(headers, url.path, given=True)(scope, receive, send)
                return
            # the token leaves the URL: the same address without it, with a cookie instead
            rest = urlencode([(k, v) for k, v in query.multi_items() if k != QUERY])
            answer = RedirectResponse(
                same_site(url.path) + (f"?{rest}" if rest else ""), status_code=303
            )
            answer.set_cookie(
                COOKIE,
                given,
                httponly=True,
                samesite="strict",
                secure=url.scheme == "https",
                path="/",
            )
            answer.headers["Cache-Control"] = "no-store"
            await answer(scope, receive, send)
            return
        given = _bearer(headers) or _cookie(headers)
        viewer = None if given is None else self.gate.accepts(given, valid)
        if viewer is None:
            await _refused(headers, url.path, given=given is not None)(scope, receive, send)
            return
        scope.setdefault("state", {})["viewer"] = viewer
        await self.app(scope, receive, send)


__all__ = [
    "ADMIN_VIEWER",
    "COOKIE",
    "OPEN_PATHS",
    "TokenAuth",
    "TokenGate",
    "Viewer",
    "is_loopback",
    "require_tokens",
    "same_site",
]
