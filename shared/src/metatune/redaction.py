"""One place that hides secrets before text is logged, published or printed.

Covers credentials in URLs (``scheme://user:pass@host``), DSN passwords (``password=...``),
secret-looking query parameters (token, key, secret, signature, password...), Standard Webhooks
secrets (``whsec_...``) and NATS nkey seeds / user JWT credentials. Applied by logging (a
filter), error events and ``metatune status``. Webhook URLs are shown (events, logs, the API, the
CLI) and published only as :func:`url_without_credentials` gives them: no user info, no query.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
_SECRET_PARAMS = re.compile(
    r"(token|secret|password|passwd|pwd|key|signature|sig|auth|credential)", re.I
)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<userinfo>[^/@\s]+)@")
_KV_PASSWORD = re.compile(
    r"(?P<key>\b(?:password|passwd|pwd)\s*=\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^\s&;]+)", re.I
)
_QUERY_SECRET = re.compile(
    r"(?P<key>[?&](?:[\w.\-]*(?:token|secret|password|passwd|pwd|key|signature|sig|auth|credential)[\w.\-]*)=)"
    r"(?P<value>[^&#\s]+)",
    re.I,
)
_WEBHOOK_SECRET = re.compile(r"\bwhsec_[A-Za-z0-9+/=_\-]+")
_NKEY_SEED = re.compile(r"\bS[ACNOPU][A-Z2-7]{56}\b")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*")


def redact(text: str) -> str:
    """``text`` with every secret this module recognises replaced by ``***``."""
    if not text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = _KV_PASSWORD.sub(lambda m: f"{m['key']}{MASK}", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m['key']}{MASK}", text)
    text = _WEBHOOK_SECRET.sub(f"whsec_{MASK}", text)
    text = _NKEY_SEED.sub(MASK, text)
    return _JWT.sub(MASK, text)


def redact_url(url: str) -> str:
    """A URL safe to show: no user info, secret-looking query values masked; one with neither is
    returned as it is (``sqlite:////abs/mlflow.db`` keeps its slashes)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if "@" not in netloc and not any(_SECRET_PARAMS.search(k) for k, _ in pairs):
        return url
    shown = url  # the rest as written: rebuilding it would drop the empty host of sqlite:////
    if "@" in netloc:
        shown = shown.replace(netloc, f"{MASK}@{netloc.rsplit('@', 1)[1]}", 1)
    if parts.query:
        query = urlencode(
            [(k, MASK if _SECRET_PARAMS.search(k) else v) for k, v in pairs],
            safe="*",
        )
        shown = shown.replace(f"?{parts.query}", f"?{query}", 1)
    return shown


def url_without_credentials(url: str) -> str:
    """``url`` with scheme, host, port and path only: no user info, query or fragment, any of
    which may carry a token whatever its name. How a webhook URL is published on the bus
    (``StudySpec.webhook_url``) and shown anywhere (``webhook_dead`` events, telemetry's log and
    delivery errors, ``/api/webhooks``, ``metatune webhooks list``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # unparseable (a bad port, a broken IPv6 host): still nothing past the path
        return redact(re.split(r"[?#]", url, maxsplit=1)[0])
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (install on handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


__all__ = ["MASK", "RedactingFilter", "redact", "redact_url", "url_without_credentials"]
