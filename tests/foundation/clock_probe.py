"""A process that records the simulated clock ticks it receives (run by test_clock.py).

It prints the shared anchor once it is subscribed to ticks, reads from stdin the hour to record
up to, and prints everything it saw once that hour's tick has arrived: the test decides the
window after both processes listen, so no fixed run time has to cover a slow start.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime

from metatune.contracts import ClockTick
from metatune.service import Service

BOUND_S = 120.0  # bounds a failure only


async def main(name: str) -> None:
    service = Service(name)
    seen: list[dict[str, str]] = []
    last: datetime | None = None
    arrived = asyncio.Event()

    @service.on_tick
    async def record(tick: ClockTick) -> None:
        nonlocal last
        seen.append({"hour": tick.hour.isoformat(), "now": service.clock.now().isoformat()})
        last = tick.hour
        arrived.set()

    async with service.running():
        anchor = service.clock.anchor.model_dump(mode="json")
        print(json.dumps({"anchor": anchor}), flush=True)
        until = datetime.fromisoformat((await asyncio.to_thread(sys.stdin.readline)).strip())
        async with asyncio.timeout(BOUND_S):
            while last is None or last < until:
                arrived.clear()
                await arrived.wait()
    print(json.dumps({"anchor": anchor, "ticks": seen}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
