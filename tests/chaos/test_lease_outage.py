"""Stop nats-server for four agent leases while two healthy agents heartbeat: the scheduler knows
the silence is its own (it is cut off too), holds every lease meanwhile, gives each agent a full
lease once it is back, and declares no agent lost: capacity stays where the agents are.

Freeze it instead (SIGSTOP for 45 s, more than twice the default lease): every connection stays
open and nothing is answered; the scheduler's own round trips go unanswered too, so it holds the
leases the same way and declares no agent lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from metatune.contracts import ErrorEvent
from metatune_scheduler.app import create_service as create_scheduler
from metatune_scheduler.settings import SchedulerSettings
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import small_registry
from tests.support.waiting import wait_for

from .conftest import RestartableNats, of, stream_events

pytestmark = pytest.mark.chaos
LEASE_S = 3.0
OUTAGE_S = 4 * LEASE_S
AGENTS = ("fra1", "osl1")


def _common(url: str, data_dir: Path) -> dict:
    return {
        "nats_url": url,
        "data_dir": data_dir,
        "heartbeat_s": 0.5,
        "agent_status_interval_s": 0.5,
        "retry_backoff_s": 0.2,
    }


@asynccontextmanager
async def both_agents_heard(url: str, data_dir: Path, lease_s: float) -> AsyncIterator[Any]:
    """The scheduler (agent leases of ``lease_s``) and an agent at each of :data:`AGENTS` on
    ``url``, running until the block ends; it starts once the scheduler has heard both agents
    and is given the scheduler's runtime."""
    scheduler = create_scheduler(
        settings=SchedulerSettings(**_common(url, data_dir / "scheduler"), agent_lease_s=lease_s),
        registry=small_registry(*AGENTS),
        debounce_s=0.2,
    )
    agents = [
        create_agent(
            dc,
            AgentSettings(
                **_common(url, data_dir / dc), bus_retry_budget_s=120.0, bus_retry_max_s=1.0
            ),
        )
        for dc in AGENTS
    ]
    runtime = scheduler.runtime
    async with scheduler.running(), agents[0].running(), agents[1].running():
        await wait_for(
            lambda: set(AGENTS) <= runtime.scheduler.live, "both agents heard", timeout=90
        )
        yield runtime


async def heard_again_none_lost(runtime: Any, back: float) -> None:
    """Both agents are heard again after ``back`` (monotonic seconds), within their lease: no
    lease runs out and the scheduler counts both live."""
    await wait_for(
        lambda: all(runtime.leases.last_heard[dc] > back for dc in AGENTS),
        "both agents heard again within their lease",
        timeout=60,
    )
    assert await runtime.check_leases() == []
    assert runtime.scheduler.lost == set() and set(AGENTS) <= runtime.scheduler.live


async def no_agent_lost_event(url: str) -> None:
    events = await stream_events(url)
    assert not [e for e in of(events, ErrorEvent) if e.code == "agent_lost"]


async def test_a_bus_outage_longer_than_the_lease_declares_no_healthy_agent_lost(
    chaos_nats: RestartableNats, tmp_path: Path
) -> None:
    url = chaos_nats.url
    async with both_agents_heard(url, tmp_path, LEASE_S) as runtime:
        chaos_nats.stop()
        await wait_for(lambda: not runtime.leases.connected, "the scheduler sees it is cut off")
        # The fault itself: the server stays down this long (not a wait for a state).
        await asyncio.sleep(OUTAGE_S)
        assert runtime.leases.lost == set()  # four leases of silence, none ran out
        chaos_nats.start()
        await wait_for(lambda: runtime.leases.connected, "the scheduler reconnected", timeout=60)
        await heard_again_none_lost(runtime, time.monotonic())
    await no_agent_lost_event(url)


FROZEN_S = 45.0  # the freeze that once lost two healthy agents
DEFAULT_LEASE_S = SchedulerSettings.model_fields["agent_lease_s"].default


async def test_a_frozen_bus_declares_no_healthy_agent_lost(
    chaos_nats: RestartableNats, tmp_path: Path
) -> None:
    url = chaos_nats.url
    async with both_agents_heard(url, tmp_path, DEFAULT_LEASE_S) as runtime:
        chaos_nats.freeze()  # this test's own nats-server, never the machine's
        try:
            # The fault itself: the server stays frozen this long (not a wait for a state).
            await asyncio.sleep(FROZEN_S)
            assert runtime.leases.lost == set() and runtime.scheduler.lost == set()
            assert not runtime.leases.connected  # it knows the silence is the bus's
        finally:
            chaos_nats.thaw()
        back = time.monotonic()
        await wait_for(
            lambda: runtime.leases.connected, "the scheduler hearing the bus", timeout=60
        )
        await heard_again_none_lost(runtime, back)
    await no_agent_lost_event(url)
