"""Telemetry service: stores every event of the durable log in PostgreSQL / TimescaleDB."""

from __future__ import annotations

from faststream.nats import NatsMessage

from metatune import subjects
from metatune.contracts import ErrorKind
from metatune.service import Service
from metatune.settings import Settings

from .adapters.store import EventStore, parse_event


def create_service(settings: Settings | None = None) -> Service:
    service = Service("telemetry", settings=settings)
    store = EventStore(service.settings.database_url)

    @service.app.after_startup
    async def connect_store() -> None:
        await store.connect()
        service.status_details["timescaledb"] = str(store.timescale).lower()

    @service.app.on_shutdown
    async def close_store() -> None:
        await store.close()

    @service.consume(subjects.EVERYTHING, durable="telemetry")
    async def record_event(msg: NatsMessage) -> None:
        """Every event of the durable log, stored once (redeliveries are ignored by event_id)."""
        subject = msg.raw_message.subject
        try:
            payload = parse_event(msg.body)
        except ValueError as exc:
            await service.report_error(kind=ErrorKind.invalid_message, code="not_an_event", message=str(exc),
                                       subject=subject, payload_excerpt=msg.body[:2048].decode(errors="replace"))
            return
        await store.insert(subject, payload)

    return service
