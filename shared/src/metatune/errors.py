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
        super().__init__(f"PostgreSQL is not reachable at {url}" + (f": {reason}" if reason else ""))


class ObjectNotFound(MetaTuneError):
    """A dataset, checkpoint or adapter key is not in the object store."""
