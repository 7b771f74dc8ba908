"""A process that records the simulated clock ticks it receives (run by test_clock.py)."""

from __future__ import annotations

import asyncio
import json
import sys

from metatune.contracts import ClockTick
from metatune.service import Service


async def main(name: str, seconds: float) -> None:
    service = Service(name)
    seen: list[dict[str, str]] = []

    @service.on_tick
    async def record(tick: ClockTick) -> None:
        seen.append({"hour": tick.hour.isoformat(), "now": service.clock.now().isoformat()})

    async with service.running():
        await asyncio.sleep(seconds)
        anchor = service.clock.anchor.model_dump(mode="json")
    print(json.dumps({"anchor": anchor, "ticks": seen}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
