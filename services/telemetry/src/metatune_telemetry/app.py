"""Telemetry service: stores every event of the durable log in PostgreSQL / TimescaleDB and
notifies each study's webhook of the events that matter to its submitter."""

from __future__ import annotations

import uuid
from typing import Any

from faststream.nats import NatsMessage

from metatune import subjects
from metatune.contracts import ErrorKind
from metatune.service import Service
from metatune.settings import Settings

from .adapters.store import EventStore, parse_event
from .adapters.webhooks import WebhookFailed, WebhookSender
from .domain.notifications import is_notified, study_ref, webhook_body


def _uuid_or_none(value: Any) -> str | None:
    try:
        return str(uuid.UUID(str(value))) if value else None
    except ValueError:
        return None


def create_service(settings: Settings | None = None) -> Service:
    service = Service("telemetry", settings=settings)
    store = EventStore(service.settings.database_url)
    webhooks = WebhookSender()

    @service.app.after_startup
    async def connect_store() -> None:
        await store.connect()
        service.status_details["timescaledb"] = str(store.timescale).lower()

    @service.app.after_shutdown  # after the broker stopped: no handler still needs the store
    async def close_store() -> None:
        await store.close()
        await webhooks.close()

    async def notify(subject: str, payload: dict[str, Any]) -> None:
        study, job = study_ref(payload)
        url = await store.webhook_for(_uuid_or_none(study), _uuid_or_none(job))
        if not url:
            return
        try:
            await webhooks.send(url, webhook_body(subject, payload), payload["event_id"])
        except WebhookFailed as exc:
            await service.report_error(kind=ErrorKind.unavailable, code="webhook_failed", message=str(exc),
                                       subject=subject, correlation_id=study or job)

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
        if subject == subjects.DATASETS_SUBMITTED and _uuid_or_none(payload.get("study_id")):
            spec = payload.get("spec") or {}
            await store.remember_study(payload["study_id"], spec.get("webhook_url"), payload["occurred_at"])
        if subject == subjects.JOBS_REQUESTED and payload.get("job_id") and payload.get("study_id"):
            await store.remember_job(payload["job_id"], payload["study_id"])
        if await store.has(payload["event_id"]):
            return  # a redelivery: stored and notified already
        if is_notified(subject) and subject != subjects.errors(service.name):
            await notify(subject, payload)  # at least once; receivers de-duplicate by idempotency-key
        await store.insert(subject, payload)

    return service
