"""The telemetry dashboard's read-only bearer tokens, on disk beside the NATS credentials.

``metatune secrets`` writes them (and ``--rotate`` rotates them with the rest); telemetry reads
them on every request, so a rotation written where it reads takes effect without a restart.
Layout of the directory (:func:`tokens_dir`; files mode 0600)::

    dashboard.token      the current token, alone on its line: what a person opens the dashboard
                         with (``?token=``) and Prometheus reads (``credentials_file``)
    dashboard.previous   the token it replaced and until when it is still accepted (JSON
                         ``{"token": ..., "valid_until": ...}``; ``{}`` before the first rotation)
    tenants/<tenant>/    the same two files for each tenant (:mod:`metatune.tenancy`): a tenant's
                         token shows only its own studies; the admin's above shows every one

A rotation makes a new current token and keeps the old one valid for the overlap (default
:data:`DEFAULT_OVERLAP`), so scrapers and open browsers move over without a gap; a second
rotation within the overlap retires the first token at once. Nothing here prints or logs a token.
"""

from __future__ import annotations

import json
import re
import secrets
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, SecretStr, ValidationError

from .bus.credentials import _write_secret
from .errors import ConfigurationError
from .settings import Settings
from .tenancy import TENANT_PATTERN

TOKEN_FILE = "dashboard.token"
TENANTS_DIR = "tenants"
TENANT = re.compile(TENANT_PATTERN)
PREVIOUS_FILE = "dashboard.previous"
DEFAULT_OVERLAP = timedelta(hours=24)


class PreviousToken(BaseModel):
    """``dashboard.previous``: the replaced token, accepted until ``valid_until``."""

    model_config = ConfigDict(frozen=True)

    token: SecretStr | None = None
    valid_until: AwareDatetime | None = None


class DashboardTokens(BaseModel):
    """The tokens a dashboard request may carry: the current one, and the previous one until its
    overlap ends."""

    model_config = ConfigDict(frozen=True)

    current: SecretStr
    previous: PreviousToken = PreviousToken()

    def valid(self, now: datetime) -> list[str]:
        """The tokens accepted at ``now``."""
        p = self.previous
        still = p.token is not None and p.valid_until is not None and now < p.valid_until
        return [self.current.get_secret_value()] + (
            [p.token.get_secret_value()] if still and p.token is not None else []
        )


def tokens_dir(settings: Settings) -> Path:
    """``METATUNE_DASHBOARD_TOKENS_DIR``, else the NATS secrets directory."""
    if settings.dashboard_tokens_dir is not None:
        return settings.dashboard_tokens_dir.expanduser().resolve()
    return settings.resolved_nats_secrets_dir()


def tenant_tokens_dir(directory: Path, tenant: str) -> Path:
    """Where ``tenant``'s dashboard tokens are, under the admin's ``directory``."""
    return directory / TENANTS_DIR / tenant


def tenant_token_dirs(directory: Path) -> dict[str, Path]:
    """Every tenant with a token folder under ``directory``, by name."""
    root = directory / TENANTS_DIR
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir() and TENANT.match(p.name)}


def read_tokens(directory: Path) -> DashboardTokens | None:
    """The tokens in ``directory``; None when it holds no ``dashboard.token``."""
    current_file = directory / TOKEN_FILE
    try:
        current = current_file.read_text().strip()
    except FileNotFoundError:
        return None
    if not current:
        raise ConfigurationError(f"{current_file} is empty: run `metatune secrets`")
    previous_file = directory / PREVIOUS_FILE
    try:
        text = previous_file.read_text().strip()
    except FileNotFoundError:
        text = ""
    try:
        previous = PreviousToken.model_validate_json(text) if text else PreviousToken()
    except ValidationError:
        raise ConfigurationError(
            f"{previous_file} is not a previous dashboard token: run `metatune secrets`"
        ) from None
    return DashboardTokens(current=SecretStr(current), previous=previous)


def write_tokens(
    directory: Path, now: datetime, *, rotate: bool = False, overlap: timedelta = DEFAULT_OVERLAP
) -> bool:
    """Create the tokens if missing (keep them if present), or with ``rotate`` replace the current
    one and keep it valid until ``now + overlap``. True when a token was written."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    current_file, previous_file = directory / TOKEN_FILE, directory / PREVIOUS_FILE
    existing = read_tokens(directory)
    if existing is not None and not rotate:
        if not previous_file.exists():  # a compose secret must exist to be mounted
            _write_secret(previous_file, "{}")
        return False
    previous: dict[str, str] = {}
    if existing is not None:
        previous = {
            "token": existing.current.get_secret_value(),
            "valid_until": (now + overlap).isoformat(),
        }
    # the previous token first: a reader between the two writes still accepts the old token
    _write_secret(previous_file, json.dumps(previous))
    _write_secret(current_file, secrets.token_urlsafe(32))
    return True


__all__ = [
    "DEFAULT_OVERLAP",
    "PREVIOUS_FILE",
    "TOKEN_FILE",
    "DashboardTokens",
    "PreviousToken",
    "read_tokens",
    "tenant_token_dirs",
    "tenant_tokens_dir",
    "tokens_dir",
    "write_tokens",
]
