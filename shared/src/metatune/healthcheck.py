"""Container health check: ``python -m metatune.healthcheck INSTANCE`` exits 0 while that
instance's heartbeat in KV is fresh (used by the compose file)."""

from __future__ import annotations

import asyncio
import sys
import time

from .bus.connection import connect_as
from .bus.streams import HEALTH_BUCKET
from .contracts import ServiceHealth
from .errors import BusUnavailable
from .settings import get_settings


async def check(instance: str) -> bool:
    settings = get_settings()
    try:
        nc = await connect_as(settings, instance)
    except BusUnavailable:
        return False
    try:
        kv = await nc.jetstream().key_value(HEALTH_BUCKET)
        entry = await kv.get(instance)
        health = ServiceHealth.model_validate_json(entry.value or b"")
        return time.time() - health.heartbeat_at < 3 * settings.heartbeat_s + 2
    except Exception:
        return False
    finally:
        await nc.close()


if __name__ == "__main__":
    sys.exit(0 if asyncio.run(check(sys.argv[1])) else 1)
