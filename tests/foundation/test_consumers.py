"""The consumer policy of every service, against a real nats-server."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from uuid import uuid4

import nats
import pytest

from metatune import subjects
from metatune.contracts import ErrorEvent, JobInfeasible
from metatune.service import Service
from metatune.settings import Settings
from tests.support.waiting import wait_for


def infeasible(reason: str = "test") -> JobInfeasible:
    return JobInfeasible(occurred_at=datetime.now(UTC), job_id=uuid4(), reason=reason)


class Harness:
    """A service consuming metatune.jobs.infeasible, plus a listener on its error subject."""

    def __init__(self, settings: Settings, behaviour) -> None:
        self.service = Service("testsvc", settings=settings)
        self.seen: list[JobInfeasible] = []
        self.deliveries: dict[str, int] = {}
        self.errors: list[ErrorEvent] = []

        @self.service.consume(subjects.JOBS_INFEASIBLE, durable="testsvc")
        async def handle(event: JobInfeasible) -> None:
            self.deliveries[event.reason] = self.deliveries.get(event.reason, 0) + 1
            await behaviour(self, event)
            self.seen.append(event)

    async def __aenter__(self) -> Harness:
        self.nc = await nats.connect(self.service.settings.nats_url)

        async def on_error(msg) -> None:
            self.errors.append(ErrorEvent.model_validate_json(msg.data))

        await self.nc.subscribe(subjects.errors("testsvc"), cb=on_error)
        self._running = self.service.running()
        await self._running.__aenter__()
        self.js = self.nc.jetstream()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._running.__aexit__(*exc)  # bounded by settings.shutdown_timeout_s
        async with asyncio.timeout(10):
            await self.nc.close()

    async def publish(self, payload: bytes, msg_id: str | None = None) -> None:
        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        await self.js.publish(
            subjects.JOBS_INFEASIBLE,
            payload,
            headers=headers,
            stream=self.service.settings.stream_name,
        )


async def accept(h: Harness, event: JobInfeasible) -> None:
    return None


async def test_malformed_payloads_become_error_events_and_consumer_goes_on(
    settings: Settings,
) -> None:
    async with Harness(settings, accept) as h:
        bad = [b"not json", b"{}", b"[1,2]", json.dumps({"job_id": "nope"}).encode()]
        for i in range(100):
            await h.publish(bad[i % len(bad)])
        good = infeasible("after-the-flood")
        await h.publish(good.to_bytes())
        await wait_for(lambda: len(h.errors) == 100 and h.seen)
        assert [e.reason for e in h.seen] == ["after-the-flood"]
        assert all(
            e.kind == "invalid_message" and e.subject == subjects.JOBS_INFEASIBLE for e in h.errors
        )
        assert {e.service for e in h.errors} == {"testsvc"}


async def test_duplicate_event_id_is_delivered_once(settings: Settings) -> None:
    async with Harness(settings, accept) as h:
        event = infeasible("dup")
        for _ in range(3):
            await h.publish(event.to_bytes(), msg_id=str(event.event_id))
        await h.publish(infeasible("marker").to_bytes())
        await wait_for(lambda: any(e.reason == "marker" for e in h.seen))
        assert [e.reason for e in h.seen].count("dup") == 1


async def fail_first_time(h: Harness, event: JobInfeasible) -> None:
    if h.deliveries[event.reason] == 1:
        raise RuntimeError("transient failure")


async def test_unacked_message_is_redelivered_then_processed(settings: Settings) -> None:
    async with Harness(settings, fail_first_time) as h:
        await h.publish(infeasible("flaky").to_bytes())
        await wait_for(lambda: h.seen)
        assert h.deliveries["flaky"] == 2
        assert h.errors == []


async def always_fail(h: Harness, event: JobInfeasible) -> None:
    if event.reason == "poison":
        raise RuntimeError("cannot handle this one")


async def test_handler_that_keeps_failing_is_dead_lettered(settings: Settings) -> None:
    async with Harness(settings, always_fail) as h:
        await h.publish(infeasible("poison").to_bytes())
        await wait_for(lambda: h.errors, timeout=30)
        assert h.deliveries["poison"] == settings.max_deliver
        [error] = h.errors
        assert error.kind == "handler_failed" and "cannot handle this one" in error.message
        assert error.deliveries == settings.max_deliver
        await h.publish(infeasible("next").to_bytes())
        await wait_for(lambda: any(e.reason == "next" for e in h.seen))


async def test_redelivery_without_ack_uses_the_durable_consumer(settings: Settings) -> None:
    """A process that takes a message and dies without acking: the next consumer gets it again."""
    s = settings.model_copy(update={"ack_wait_s": 1.0})
    event = infeasible("orphan")
    async with Harness(s, accept) as h:
        pass  # creates the durable consumer, then stops
    nc = await nats.connect(s.nats_url)
    js = nc.jetstream()
    await js.publish(subjects.JOBS_INFEASIBLE, event.to_bytes(), stream=s.stream_name)
    sub = await js.pull_subscribe_bind("testsvc", stream=s.stream_name)
    [first] = await sub.fetch(1, timeout=5)
    assert first.metadata.num_delivered == 1  # taken, never acked
    async with asyncio.timeout(10):
        await nc.close()
    async with Harness(s, accept) as h:
        await wait_for(lambda: h.seen)
        assert h.seen[0].event_id == event.event_id


async def test_a_shutdown_that_hangs_is_abandoned_with_the_stuck_task_logged(
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A drain or hook that never returns must not hang the program embedding the service."""
    service = Service("testsvc", settings=settings.model_copy(update={"shutdown_timeout_s": 0.5}))
    never = asyncio.Event()

    async def stuck_shutdown_hook() -> None:
        await never.wait()

    service.app.on_shutdown(stuck_shutdown_hook)
    began = asyncio.get_running_loop().time()
    async with service.running():
        pass
    assert asyncio.get_running_loop().time() - began < 10
    [record] = [r for r in caplog.records if "shutdown did not finish" in r.getMessage()]
    assert record.levelname == "ERROR" and "stuck_shutdown_hook" in record.getMessage()


async def test_a_background_loop_that_swallows_a_cancellation_still_stops(
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Python 3.11's asyncio.wait_for can swallow a cancellation (python/cpython#86296); the heartbeat
    then slept on and shutdown hung. Stopping cancels again until the loop ends."""
    service = Service("testsvc", settings=settings.model_copy(update={"shutdown_timeout_s": 5.0}))
    cancellations = 0
    looping = asyncio.Event()

    @service.background
    async def loop_that_loses_one_cancellation() -> None:
        nonlocal cancellations
        while True:
            looping.set()
            try:
                await asyncio.sleep(0.05)  # the loop's own period (a heartbeat's), not a wait
            except asyncio.CancelledError:
                cancellations += 1
                if cancellations == 1:
                    continue  # what a swallowed cancellation looks like from here
                raise

    async with service.running():
        await asyncio.wait_for(looping.wait(), 60)  # stop only once the loop runs
    assert cancellations == 2
    assert not [r for r in caplog.records if "shutdown did not finish" in r.getMessage()]
