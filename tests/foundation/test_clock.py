"""Simulated time agrees across processes because it is defined through the bus."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from metatune.clock import FixedClock, SimulatedClock, floor_hour, new_anchor
from metatune.contracts import ClockAnchor

PROBE = Path(__file__).with_name("clock_probe.py")


def test_simulated_clock_runs_hours_in_seconds() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    anchor = new_anchor(seconds_per_hour=2.0, sim_start=start)
    clock = SimulatedClock(anchor.model_copy(update={"wall_start": anchor.wall_start - 3.0}))
    assert clock.now() - start >= timedelta(hours=1.5)
    assert clock.wall_seconds(timedelta(hours=1)) == 2.0


def test_fixed_clock_moves_only_when_told() -> None:
    clock = FixedClock(datetime(2026, 1, 1, 5, 30, tzinfo=UTC))
    assert clock.current_hour() == datetime(2026, 1, 1, 5, tzinfo=UTC)
    clock.advance(timedelta(minutes=45))
    assert clock.current_hour() == datetime(2026, 1, 1, 6, tzinfo=UTC)


def test_ticks_agree_across_two_processes(private_nats: str, env_for) -> None:
    env = env_for(
        METATUNE_NATS_URL=private_nats,
        METATUNE_CLOCK="simulated",
        METATUNE_SIM_SECONDS_PER_HOUR="0.5",
    )
    procs = [
        subprocess.Popen(
            [sys.executable, str(PROBE), f"probe{i}"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    try:
        # each prints the anchor once it listens to ticks; from then on both see every tick
        anchors = [json.loads(p.stdout.readline())["anchor"] for p in procs]
        assert anchors[0] == anchors[1]
        now = SimulatedClock(ClockAnchor.model_validate(anchors[0])).current_hour()
        window = [now + timedelta(hours=h) for h in range(1, 5)]
        for p in procs:  # record up to the fourth hour from now
            p.stdin.write(f"{window[-1].isoformat()}\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    results = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert results[0]["anchor"] == results[1]["anchor"]
    hours = [[t["hour"] for t in r["ticks"]] for r in results]
    for ticks in hours:  # the four hours after both listened reached both
        assert set(window) <= {datetime.fromisoformat(h) for h in ticks}, (window, hours)
    for ticks in hours:  # one tick per hour, consecutive, even though both processes publish them
        parsed = [datetime.fromisoformat(h) for h in ticks]
        assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(parsed)), ticks
    for result in results:  # each process, at each tick, agrees that hour has begun
        for tick in result["ticks"]:
            assert floor_hour(datetime.fromisoformat(tick["now"])) >= datetime.fromisoformat(
                tick["hour"]
            )
