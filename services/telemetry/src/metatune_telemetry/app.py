"""Telemetry service: stores every event of both streams in PostgreSQL / TimescaleDB, notifies
each study's webhook of its state changes from an outbox, and serves the API and dashboard.

Its runtime, :class:`~.adapters.runtime.Telemetry` (``service.runtime``), holds the database and
the writers; each of its loops runs as a background task: the schema migration, ingestion per
stream (and writer processes), webhook delivery, and, when the settings ask for them, the MLflow
export (``METATUNE_MLFLOW_TRACKING_URI``) and the HTTP API and dashboard
(``METATUNE_TELEMETRY_HTTP_PORT`` not 0).
"""

from __future__ import annotations

from metatune.clock import RealClock
from metatune.service import Service
from metatune.settings import Settings

from .adapters.runtime import Telemetry
from .api.adapters.auth import require_tokens
from .settings import TelemetrySettings


def create_service(
    settings: Settings | None = None, *, schema: str | None = None
) -> Service[Telemetry]:
    s = TelemetrySettings.of(settings)
    service: Service[Telemetry] = Service("telemetry", settings=s)
    telemetry = service.runtime = Telemetry(service, s, schema)
    loops = [telemetry.migrate, telemetry.ingest_log, telemetry.ingest_status]
    loops += [telemetry.run_writers] if telemetry.writers.count else []
    loops += [telemetry.deliver_webhooks]
    loops += [telemetry.export_to_mlflow] if s.mlflow_tracking_uri else []
    if s.telemetry_http_port:
        # refused at start-up, not in the background: a non-loopback dashboard needs its tokens
        require_tokens(s, RealClock().now)
        loops.append(telemetry.serve_http)
    for loop in loops:
        service.background(loop)
    service.app.after_shutdown(telemetry.db.close)
    return service
