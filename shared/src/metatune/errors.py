"""Typed exceptions shared by every service."""

from __future__ import annotations


class MetaTuneError(Exception):
    """Base of every MetaTune error."""


class ConfigurationError(MetaTuneError):
    """Settings or a committed config file are wrong; raised at start-up, never later."""


class BusUnavailable(MetaTuneError):
    """NATS did not answer at the configured URL."""

    def __init__(self, url: str, reason: str = "") -> None:
        self.url = url
        super().__init__(f"NATS is not reachable at {url}" + (f": {reason}" if reason else ""))


class DatabaseUnavailable(MetaTuneError):
    """PostgreSQL did not answer at the configured URL."""

    def __init__(self, url: str, reason: str = "") -> None:
        self.url = url
        super().__init__(
            f"PostgreSQL is not reachable at {url}" + (f": {reason}" if reason else "")
        )


class ObjectNotFound(MetaTuneError):
    """A dataset, checkpoint or adapter key is not in the object store."""


class InputNotAllowed(MetaTuneError):
    """A user-supplied location points where the platform must not go (outside the data roots, a
    non-public address, a scheme other than http(s), a redirect to any of those)."""


class DownloadFailed(MetaTuneError):
    """A URL could not be fetched within the limits (status, size, time, redirects)."""
