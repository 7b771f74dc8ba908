"""The secured nats-server's fixtures (tests/support/secured_bus.py)."""

from tests.support.secured_bus import admin, secured  # noqa: F401 (fixtures)
