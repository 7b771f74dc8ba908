"""The settings of telemetry (event log, webhooks, dashboard), over the platform's (:class:`metatune.settings.Settings`):
the same ``METATUNE_*`` environment variables, the same ``.env``; the README's configuration
table lists them under their service."""

from __future__ import annotations

from pydantic import Field

from metatune.settings import Settings


class TelemetrySettings(Settings):
    """Telemetry's own: its writers, the dashboard's address, webhooks, MLflow."""

    telemetry_batch_size: int = Field(
        2000, ge=1, le=10000, description="Events the telemetry writer stores per COPY batch"
    )
    telemetry_writers: int = Field(
        1,
        ge=1,
        le=32,
        description="Processes that store the event log stream, sharing its durable consumer; each one more uses another CPU core",
    )
    telemetry_pool_size: int = Field(
        4, ge=2, le=64, description="PostgreSQL connections of the telemetry service"
    )
    telemetry_http_host: str = Field(
        "127.0.0.1", description="Address the telemetry API and dashboard listen on"
    )
    webhook_secret: str = Field(
        "",
        description="Standard Webhooks signing secret (whsec_...); empty: one is generated and kept in the database",
    )
    webhook_allowed_networks: list[str] = Field(
        default_factory=list,
        description="CIDR networks webhooks may reach besides public addresses (e.g. 127.0.0.1/32 in tests)",
    )
    webhook_timeout_s: float = Field(
        10.0, gt=0, description="Seconds a webhook receiver has to answer one delivery"
    )
    webhook_max_attempts: int = Field(
        8, ge=1, description="Delivery attempts before a notification is dead-lettered"
    )
    webhook_backoff_s: float = Field(
        5.0, gt=0, description="First webhook retry delay; doubles per attempt, with jitter"
    )
    webhook_max_backoff_s: float = Field(
        3600.0, gt=0, description="Longest wait between two attempts (Retry-After too)"
    )
    webhook_concurrency: int = Field(
        16, ge=1, description="Deliveries in flight at once (one per receiver URL)"
    )
    mlflow_tracking_uri: str | None = Field(
        None,
        description="MLflow tracking URI each completed study is exported to, as given "
        "(metatune-telemetry[mlflow]); unset: off",
    )
    mlflow_artifact_location: str | None = Field(
        None,
        description="A new MLflow experiment's artifact folder or URI; unset: beside a SQLite "
        "store, else where the server decides",
    )
