"""The telemetry service's runtime: its database, the event writer and the writer processes, and
the loops that run over them (``service.runtime``; :func:`metatune_telemetry.app.create_service`
starts each loop as a background task).

* migrate: the schema first, however long PostgreSQL takes to come up; every other loop waits;
* ingestion, one per stream (:class:`~.consumer.StreamIngestor`): validate, COPY, ack only what
  is committed; with ``telemetry_writers`` > 1, writer processes share the event log stream's
  durable consumer (:class:`~.writers.WriterPool`);
* webhook delivery (:class:`~.outbox.OutboxWorker`): reads the outbox, never blocks ingestion;
* the MLflow export (:class:`~.mlflow_export.ExportWorker`) and the HTTP API and dashboard
  (uvicorn), when the settings ask for them.

What it cannot store or deliver it reports as error events (never its own error events again).
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
from metatune.contracts import ErrorKind
from metatune.errors import DatabaseUnavailable
from metatune.provenance import FOREIGN_RUN_EVENT
from metatune.redaction import redact_url, url_without_credentials
from metatune.service import Service
from metatune.webhook_seal import opener

from ..domain.events import Rejected
from ..exports.adapters.mlflow_export import ExportWorker
from ..ingest.adapters.consumer import StreamIngestor
from ..ingest.adapters.writer import EventWriter, Incoming
from ..ingest.adapters.writer_pool import RejectNote, WriterPool, connect_ingest, log_ingestor
from ..settings import TelemetrySettings
from ..webhooks.adapters.delivery import Outcome
from ..webhooks.adapters.outbox import Claimed, OutboxWorker
from .db import Database

log = logging.getLogger("metatune.telemetry")
EXCERPT_BYTES = 2048
OWN_ERRORS = subjects.errors("telemetry")


def escaped(data: bytes, limit: int = EXCERPT_BYTES) -> str:
    """Bytes as printable text: invalid UTF-8 and NUL shown as backslash escapes."""
    return data[:limit].decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


class Telemetry:
    """What tests, the CLI and the benchmark read through ``service.runtime``: ``db``, ``ready``
    (set once the schema is migrated) and ``writers`` (their pids and counters)."""

    def __init__(
        self, service: Service[Telemetry], settings: TelemetrySettings, schema: str | None
    ) -> None:
        self.service = service
        self.settings = settings
        self.db = Database(
            settings.database_url,
            schema=schema,
            max_size=settings.telemetry_pool_size,
            connect_timeout_s=settings.connect_timeout_s,
        )
        self.writer = EventWriter(
            self.db, opener(settings), concurrent=settings.telemetry_writers > 1
        )
        self.writers = WriterPool(settings, schema, settings.telemetry_writers - 1)
        self.ready = asyncio.Event()
        self.name = settings.service_name or "telemetry"

    # ----------------------------------------------------------------- reporting
    async def report_rejected(self, rejected: list[tuple[Incoming, Rejected]]) -> None:
        for message, reason in rejected:
            if message.subject == OWN_ERRORS:
                continue  # never answer our own error events with more of them
            try:
                await self.service.report_error(
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

    async def report_dead(self, row: Claimed, outcome: Outcome) -> None:
        await self.service.report_error(
            kind=ErrorKind.unavailable,
            code="webhook_dead",
            message=f"webhook {row.message_id} to {url_without_credentials(row.url)} given up: "
            f"{outcome.error}",
            details={"outbox_id": row.id, "attempts": row.attempts},
        )

    async def report_export_failed(self, study: UUID, exc: Exception) -> None:
        tracking_uri = self.settings.mlflow_tracking_uri or ""
        try:
            await self.service.report_error(
                kind=ErrorKind.unavailable,
                code="mlflow_export_failed",
                message=f"MLflow export of study {study} to {redact_url(tracking_uri)} "
                f"failed (tried again later): {' '.join(str(exc).split())}",
                correlation_id=study,
                details={"study_id": str(study), "error": type(exc).__name__},
            )
        except Exception as error:  # the bus is down: the log keeps it, the export retries
            log.warning("could not publish the MLflow export error of %s: %r", study, error)

    # ----------------------------------------------------------------- the loops
    async def migrate(self) -> None:
        applied = await retrying(  # PostgreSQL may start after us: wait for it, however long
            self.db.migrate,
            what="telemetry: migrating the schema",
            budget_s=math.inf,
            initial_s=0.5,
            max_delay_s=5.0,
            transient=(DatabaseUnavailable,),
        )
        self.service.status_details["storage_mode"] = self.db.mode or ""
        if applied:
            log.info("telemetry migrations applied: %s", ", ".join(applied))
        self.ready.set()

    async def ingest_log(self) -> None:
        await self.ready.wait()
        nc = await connect_ingest(self.settings, f"{self.name}-ingest-log")
        try:
            await log_ingestor(
                nc,
                nc.jetstream(),
                self.writer,
                self.settings,
                self.report_rejected,
                self.service.status_details,
            ).run()
        finally:
            await nc.close()

    async def ingest_status(self) -> None:
        await self.ready.wait()
        nc = await connect_ingest(self.settings, f"{self.name}-ingest-status")
        try:
            await StreamIngestor(
                nc,
                nc.jetstream(),
                self.writer,
                stream=self.settings.status_stream_name,
                durable="telemetry-status",
                batch_size=self.settings.telemetry_batch_size,
                on_rejected=self.report_rejected,
                status=self.service.status_details,
            ).run()
        finally:
            await nc.close()

    async def run_writers(self) -> None:
        await self.ready.wait()

        async def relay(notes: list[RejectNote]) -> None:
            await self.report_rejected(
                [
                    (Incoming(stream, seq, subject, data), Rejected(subject, code, reason))
                    for stream, seq, subject, data, code, reason in notes
                ]
            )

        await self.writers.run(relay)

    async def deliver_webhooks(self) -> None:
        await self.ready.wait()
        await OutboxWorker(self.db, self.settings, on_dead=self.report_dead).run()

    async def export_to_mlflow(self) -> None:
        await self.ready.wait()
        assert self.settings.mlflow_tracking_uri  # started only when it is set
        await ExportWorker(
            self.db,
            self.settings.mlflow_tracking_uri,
            self.fetch_adapter,
            self.report_export_failed,
            artifact_location=self.settings.mlflow_artifact_location,
        ).run()

    async def fetch_adapter(self, key: str, path: Path) -> None:
        objects = self.service.objects
        assert objects is not None  # set once connected, before any background loop runs
        await objects.get_to_file(ADAPTERS_BUCKET, key, path)

    async def serve_http(self) -> None:
        await self.ready.wait()
        import uvicorn

        from ..api.adapters.http import create_app

        s = self.settings
        config = uvicorn.Config(
            create_app(self.db, s),
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
