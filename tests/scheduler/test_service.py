"""Through a real NATS: job requested + forecasts -> assignments on the right datacenter subject;
a restarted scheduler rebuilds its state from the stream and sends nothing twice."""

from __future__ import annotations

import nats
import pytest

from metatune import subjects
from metatune.bus import publish_event  # noqa: F401  (the service publishes through it)
from metatune.contracts import Assignment, AssignmentAction, Plan, RegionGroup
from metatune_scheduler.app import create_service
from metatune_scheduler.settings import SchedulerSettings
from tests.support.builders import small_registry
from tests.support.waiting import wait_for

from .conftest import NOW, announce_agents, forecast, job_requested

REGISTRY = small_registry("fra1", "osl1", "sjc1")
SENTINEL = "Metatune-Test-Sentinel"


async def _publish(js, subject: str, event) -> None:
    await js.publish(subject, event.to_bytes(), headers={"Nats-Msg-Id": str(event.event_id)})


@pytest.mark.asyncio
async def test_requested_job_reaches_its_datacenter_and_survives_a_restart(
    module_nats: str,
) -> None:
    settings = SchedulerSettings(
        nats_url=module_nats,
        clock="simulated",
        sim_seconds_per_hour=3600.0,
        sim_start=NOW,
        heartbeat_s=0.5,
        agent_lease_s=3600.0,  # agents heard once (announce_agents): none is lost here
    )
    received: dict[str, list[Assignment]] = {}
    plans: list[Plan] = []
    drained: set[str] = set()  # subscriptions our own sentinel has reached
    nc = await nats.connect(module_nats)

    async def on_assignment(msg) -> None:
        if msg.headers and SENTINEL in msg.headers:
            drained.add("assignments")
        else:
            received.setdefault(msg.subject, []).append(Assignment.model_validate_json(msg.data))

    async def on_plan(msg) -> None:
        if msg.headers and SENTINEL in msg.headers:
            drained.add("plans")
        else:
            plans.append(Plan.model_validate_json(msg.data))

    await nc.subscribe(subjects.ASSIGNMENTS_ALL, cb=on_assignment)
    await nc.subscribe(subjects.PLANS, cb=on_plan)
    service = create_service(settings=settings, registry=REGISTRY, debounce_s=0.2)
    try:
        async with service.running():
            js = nc.jetstream()
            await announce_agents(js, service)
            for event in (
                forecast("DE", [300.0]),
                forecast("NO", [25.0] * 2 + [80.0] * 22),
                forecast("US-CAL-CISO", [200.0]),
                job_requested(1, hours=2, gpus=4, home="fra1", group=RegionGroup.EU),
                job_requested(2, hours=1, gpus=2, home="sjc1", group=RegionGroup.NA, deadline_h=1),
            ):
                subject = (
                    subjects.forecasts(event.region)
                    if hasattr(event, "region")
                    else subjects.JOBS_REQUESTED
                )
                await _publish(js, subject, event)
            await wait_for(lambda: len(received) == 2)
            solves = service.runtime.solves
        assert set(received) == {subjects.assignments("osl1"), subjects.assignments("sjc1")}
        eu = received[subjects.assignments("osl1")]
        assert [a.action for a in eu] == [AssignmentAction.start] and eu[0].job_id == job_requested(
            1, hours=2
        ).job_id
        assert solves <= 3  # five events, coalesced
        published = len(plans)

        restarted = create_service(settings=settings, registry=REGISTRY, debounce_s=0.2)
        async with restarted.running():
            await wait_for(lambda: restarted.runtime.solves >= 1)
            state = restarted.runtime.scheduler.state
            assert (
                state.last_plan is not None
                and state.last_plan.plan_version == plans[-1].plan_version
            )
        # Whatever the restarted scheduler sent was acknowledged before it stopped, so it was
        # routed to us before a message we publish now: once our sentinels arrive, nothing of
        # its can still be on the way.
        await nc.publish(subjects.assignments("sentinel"), b"", headers={SENTINEL: "1"})
        await nc.publish(subjects.PLANS, b"", headers={SENTINEL: "1"})
        await wait_for(lambda: drained == {"assignments", "plans"}, "our sentinels delivered")
        assert sum(len(v) for v in received.values()) == 2 and len(plans) == published
    finally:
        await nc.close()
