"""Telemetry service: stores every event of both streams in PostgreSQL / TimescaleDB, notifies
each study's webhook of its state changes from an outbox, and serves the API and dashboard.

Independent loops (background tasks of the service):

* ingestion, one per stream (:class:`~.adapters.consumer.StreamIngestor`): validate, COPY,
  ack only what is committed; with ``telemetry_writers`` > 1, writer processes share the event
  log stream's durable consumer (:class:`~.adapters.writers.WriterPool`);
* webhook delivery (:class:`~.adapters.outbox.OutboxWorker`): reads the outbox, never blocks
  ingestion;
* the HTTP API and dashboard (uvicorn), when ``METATUNE_TELEMETRY_HTTP_PORT`` is not 0;
* the MLflow export (:class:`~.adapters.mlflow_export.ExportWorker`), when
  ``METATUNE_MLFLOW_TRACKING_URI`` is set: each study that completes, exported once; a failure
  is an error event and a later retry, never a delay to ingestion.
"""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from uuid import UUID

from metatune import subjects
from metatune.bus import ADAPTERS_BUCKET
from metatune.bus.retry import retrying
from metatune.clock import RealClock
from metatune.contracts import ErrorKind
from metatune.errors import DatabaseUnavailable
from metatune.provenance import FOREIGN_RUN_EVENT
from metatune.redaction import redact_url, url_without_credentials
from metatune.service import Service
from metatune.settings import Settings
from metatune.webhook_seal import opener

from .adapters.auth import require_tokens
from .adapters.consumer import StreamIngestor
from .adapters.db import Database
from .adapters.delivery import Outcome
from .adapters.mlflow_export import ExportWorker
from .adapters.outbox import Claimed, OutboxWorker
from .adapters.writer import EventWriter, Incoming
from .adapters.writers import RejectNote, WriterPool, connect_ingest, log_ingestor
from .domain.events import Rejected
from .settings import TelemetrySettings

log = logging.getLogger("metatune.telemetry")
EXCERPT_BYTES = 2048
OWN_ERRORS = subjects.errors("telemetry")


def escaped(data: bytes, limit: int = EXCERPT_BYTES) -> str:
    """Bytes as printable text: invalid UTF-8 and NUL shown as backslash escapes."""
    return data[:limit].decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


class TelemetryService(Service):
    """The service, with what tests, the CLI and the benchmark read through it."""

    db: Database
    ready: asyncio.Event  # set once the schema is migrated
    writers: WriterPool  # their pids and counters


def create_service(
    settings: Settings | None = None, *, schema: str | None = None
) -> TelemetryService:
    s = TelemetrySettings.of(settings)
    service = TelemetryService("telemetry", settings=s)
    db = Database(
        s.database_url,
        schema=schema,
        max_size=s.telemetry_pool_size,
        connect_timeout_s=s.connect_timeout_s,
    )
    writer = EventWriter(db, opener(s), concurrent=s.telemetry_writers > 1)
    ready = asyncio.Event()
    service.db = db
    service.ready = ready

    async def report_rejected(rejected: list[tuple[Incoming, Rejected]]) -> None:
        for message, reason in rejected:
            if message.subject == OWN_ERRORS:
                continue  # never answer our own error events with more of them
            try:
                await service.report_error(
                    # a run event from elsewhere than its job's datacenter is well-formed, and refused
                    kind=ErrorKind.bad_input
                    if reason.code == FOREIGN_RUN_EVENT
                    else ErrorKind.invalid_message,
                    code=reason.code,
                    message=reason.reason,
                    subject=message.subject,
                    payload_excerpt=escaped(message.data),
                    details={"stream": message.stream, "stream_seq": message.seq},
                )
            except Exception as exc:
                log.warning(
                    "could not publish the error event of %s seq %d: %r",
                    message.stream,
                    message.seq,
                    exc,
                )

    async def report_dead(row: Claimed, outcome: Outcome) -> None:
        await service.report_error(
            kind=ErrorKind.unavailable,
            code="webhook_dead",
            message=f"webhook {row.message_id} to {url_without_credentials(row.url)} given up: {outcome.error}",
            details={"outbox_id": row.id, "attempts": row.attempts},
        )

    @service.background
    async def migrate() -> None:
        applied = await retrying(  # PostgreSQL may start after us: wait for it, however long
            db.migrate,
            what="telemetry: migrating the schema",
            budget_s=math.inf,
            initial_s=0.5,
            max_delay_s=5.0,
            transient=(DatabaseUnavailable,),
        )
        service.status_details["storage_mode"] = db.mode or ""
        if applied:
            log.info("telemetry migrations applied: %s", ", ".join(applied))
        ready.set()

    name = s.service_name or "telemetry"

    @service.background
    async def ingest_telemetry_log() -> None:
        await ready.wait()
        nc = await connect_ingest(s, f"{name}-ingest-log")
        try:
            await log_ingestor(
                nc, nc.jetstream(), writer, s, report_rejected, service.status_details
            ).run()
        finally:
            await nc.close()

    @service.background
    async def ingest_telemetry_status() -> None:
        await ready.wait()
        nc = await connect_ingest(s, f"{name}-ingest-status")
        try:
            await StreamIngestor(
                nc,
                nc.jetstream(),
                writer,
                stream=s.status_stream_name,
                durable="telemetry-status",
                batch_size=s.telemetry_batch_size,
                on_rejected=report_rejected,
                status=service.status_details,
            ).run()
        finally:
            await nc.close()

    writers = WriterPool(s, schema, s.telemetry_writers - 1)
    service.writers = writers
    if writers.count:

        @service.background
        async def run_writers() -> None:
            await ready.wait()

            async def relay(notes: list[RejectNote]) -> None:
                await report_rejected(
                    [
                        (Incoming(stream, seq, subject, data), Rejected(subject, code, reason))
                        for stream, seq, subject, data, code, reason in notes
                    ]
                )

            await writers.run(relay)

    @service.background
    async def deliver_webhooks() -> None:
        await ready.wait()
        await OutboxWorker(db, s, on_dead=report_dead).run()

    if s.mlflow_tracking_uri:
        tracking_uri = s.mlflow_tracking_uri

        async def fetch_adapter(key: str, path: Path) -> None:
            objects = service.objects
            assert objects is not None  # set once connected, before any background loop runs
            await objects.get_to_file(ADAPTERS_BUCKET, key, path)

        async def report_export_failed(study: UUID, exc: Exception) -> None:
            try:
                await service.report_error(
                    kind=ErrorKind.unavailable,
                    code="mlflow_export_failed",
                    message=f"MLflow export of study {study} to {redact_url(tracking_uri)} "
                    f"failed (tried again later): {' '.join(str(exc).split())}",
                    correlation_id=study,
                    details={"study_id": str(study), "error": type(exc).__name__},
                )
            except Exception as error:  # the bus is down: the log keeps it, the export retries
                log.warning("could not publish the MLflow export error of %s: %r", study, error)

        @service.background
        async def export_to_mlflow() -> None:
            await ready.wait()
            await ExportWorker(
                db,
                tracking_uri,
                fetch_adapter,
                report_export_failed,
                artifact_location=s.mlflow_artifact_location,
            ).run()

    if s.telemetry_http_port:
        # refused at start-up, not in the background: a non-loopback dashboard needs its tokens
        require_tokens(s, RealClock().now)

        @service.background
        async def serve_http() -> None:
            await ready.wait()
            import uvicorn

            from .adapters.http import create_app

            config = uvicorn.Config(
                create_app(db, s),
                host=s.telemetry_http_host,
                port=s.telemetry_http_port,
                log_level="warning",
                lifespan="off",
            )
            log.info(
                "telemetry dashboard on http://%s:%d/", s.telemetry_http_host, s.telemetry_http_port
            )
            try:
                await uvicorn.Server(config).serve()
            except (
                SystemExit
            ):  # uvicorn exits when it cannot bind: the port is taken; ingestion goes on
                log.error(
                    "telemetry HTTP: cannot listen on %s:%d; the API and dashboard are off",
                    s.telemetry_http_host,
                    s.telemetry_http_port,
                )

    @service.app.after_shutdown
    async def close_db() -> None:
        await db.close()

    return service
