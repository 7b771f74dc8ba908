"""Telemetry acks what it stores, through nats-py's public client only: once every message is in
the database, each stream's durable consumer has its ack floor at the stream's last message and
nothing left pending (no message would come back after ``ack_wait``)."""

from __future__ import annotations

from metatune_telemetry.app import create_service
from metatune_telemetry.ingest.adapters.writer_pool import LOG_DURABLE
from tests.support.waiting import wait_for

from .conftest import publish_all
from .recording import no_gap, samples_without_webhook


async def test_every_stored_message_is_acked(tsettings, schema, js) -> None:
    service = create_service(tsettings, schema=schema)
    async with service.running():
        events = samples_without_webhook()
        await publish_all(js, tsettings, events)
        await no_gap(js, service.runtime.db, tsettings)
        consumers = [
            (tsettings.stream_name, LOG_DURABLE),
            (tsettings.status_stream_name, "telemetry-status"),
        ]
        lasts: dict[str, int] = {}

        async def all_acked() -> bool:
            for stream, durable in consumers:
                lasts[stream] = (await js.stream_info(stream)).state.last_seq  # ticks may follow
                info = await js.consumer_info(stream, durable)
                if info.ack_floor.stream_seq < lasts[stream] or info.num_ack_pending:
                    return False
            return True

        await wait_for(all_acked, "every stored message acked, none pending")
        assert sum(lasts.values()) >= len(events)
