"""Stop nats-server for four agent leases while two healthy agents heartbeat: the scheduler knows
the silence is its own (it is cut off too), holds every lease meanwhile, gives each agent a full
lease once it is back, and declares no agent lost: capacity stays where the agents are.

Freeze it instead (SIGSTOP for 45 s, more than twice the default lease): every connection stays
open and nothing is answered; the scheduler's own round trips go unanswered too, so it holds the
leases the same way and declares no agent lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

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


async def test_a_bus_outage_longer_than_the_lease_declares_no_healthy_agent_lost(
    chaos_nats: RestartableNats, tmp_path: Path
) -> None:
    url = chaos_nats.url
    scheduler = create_scheduler(
        settings=SchedulerSettings(**_common(url, tmp_path / "scheduler"), agent_lease_s=LEASE_S),
        registry=small_registry(*AGENTS),
        debounce_s=0.2,
    )
    agents = [
        create_agent(
            dc,
            AgentSettings(
                **_common(url, tmp_path / dc), bus_retry_budget_s=120.0, bus_retry_max_s=1.0
            ),
        )
        for dc in AGENTS
    ]
    runtime = scheduler.runtime
    async with scheduler.running(), agents[0].running(), agents[1].running():
        await wait_for(
            lambda: set(AGENTS) <= runtime.scheduler.live, "both agents heard", timeout=90
        )

        chaos_nats.stop()
        await wait_for(lambda: not runtime.leases.connected, "the scheduler sees it is cut off")
        # The fault itself: the server stays down this long (not a wait for a state).
        await asyncio.sleep(OUTAGE_S)
        assert runtime.leases.lost == set()  # four leases of silence, none ran out
        chaos_nats.start()
        await wait_for(lambda: runtime.leases.connected, "the scheduler reconnected", timeout=60)
        back = time.monotonic()
        await wait_for(
            lambda: all(runtime.leases.last_heard[dc] > back for dc in AGENTS),
            "both agents heard again within their lease",
            timeout=60,
        )
        assert await runtime.check_leases() == []
        assert runtime.scheduler.lost == set() and set(AGENTS) <= runtime.scheduler.live

    events = await stream_events(url)
    assert not [e for e in of(events, ErrorEvent) if e.code == "agent_lost"]


FROZEN_S = 45.0  # the freeze that once lost two healthy agents
DEFAULT_LEASE_S = SchedulerSettings.model_fields["agent_lease_s"].default


async def test_a_frozen_bus_declares_no_healthy_agent_lost(
    chaos_nats: RestartableNats, tmp_path: Path
) -> None:
    url = chaos_nats.url
    scheduler = create_scheduler(
        settings=SchedulerSettings(
            **_common(url, tmp_path / "scheduler"), agent_lease_s=DEFAULT_LEASE_S
        ),
        registry=small_registry(*AGENTS),
        debounce_s=0.2,
    )
    agents = [
        create_agent(
            dc,
            AgentSettings(
                **_common(url, tmp_path / dc), bus_retry_budget_s=120.0, bus_retry_max_s=1.0
            ),
        )
        for dc in AGENTS
    ]
    runtime = scheduler.runtime
    async with scheduler.running(), agents[0].running(), agents[1].running():
        await wait_for(
            lambda: set(AGENTS) <= runtime.scheduler.live, "both agents heard", timeout=90
        )
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
        await wait_for(
            lambda: all(runtime.leases.last_heard[dc] > back for dc in AGENTS),
            "both agents heard again within their lease",
            timeout=60,
        )
        assert await runtime.check_leases() == []
        assert runtime.scheduler.lost == set() and set(AGENTS) <= runtime.scheduler.live

    events = await stream_events(url)
    assert not [e for e in of(events, ErrorEvent) if e.code == "agent_lost"]
