"""The platform's settings, read from ``METATUNE_*`` environment variables (and a ``.env`` file):
what every service and the CLI read (infrastructure, credentials, the bus, the clock, identity,
limits on input, datacenters). Each service adds its own in a subclass (its ``settings.py``:
``ProfilerSettings``, ``ForecasterSettings``, ``SchedulerSettings``, ``TelemetrySettings``,
``AgentSettings``; the CLI's ``CliSettings``), under the same prefix, so one environment
configures them all. The README's configuration table lists them, class by class.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Self
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from pydantic import AwareDatetime, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .tenancy import DEFAULT_TENANT, TENANT_PATTERN

if TYPE_CHECKING:  # the registry imports every contract: only its readers pay for it
    from .registry import Registry


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` for its user (percent-encoded), replacing any password it had."""
    parts = urlsplit(url)
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{quote(unquote(user), safe='')}:{quote(password, safe='')}@{host}" + (
        f":{parts.port}" if parts.port else ""
    )
    return urlunsplit(parts._replace(netloc=netloc))


class Settings(BaseSettings):
    """What every service and the CLI read."""

    model_config = SettingsConfigDict(env_prefix="METATUNE_", env_file=".env", extra="ignore")

    @model_validator(mode="after")
    def _database_password_from_file(self) -> Settings:
        """The password lives in a file (a compose secret), never in the URL an operator writes down."""
        if self.database_password_file is not None:
            self.database_url = with_password(
                self.database_url, self.database_password_file.read_text().strip()
            )
        return self

    # Infrastructure
    nats_url: str = Field(
        "nats://127.0.0.1:4222", description="NATS server URL (JetStream enabled)"
    )
    database_url: str = Field(
        "postgresql://postgres@127.0.0.1:5432/test", description="PostgreSQL / TimescaleDB URL"
    )
    database_password_file: Path | None = Field(
        None,
        description="File holding the database password, put into database_url at start (compose secrets)",
    )
    data_dir: Path = Field(
        Path(".metatune"), description="Where embedded servers, caches and run state live"
    )
    connect_timeout_s: float = Field(
        2.0, gt=0, description="Seconds to wait for NATS / PostgreSQL to answer"
    )

    # NATS credentials (see README "Security"); none of them holds a secret itself, only a path
    nats_nkey_file: Path | None = Field(
        None,
        description="nkey seed file this process authenticates with (services, agents, submitters)",
    )
    nats_user: str = Field(
        "", description="NATS user of a password login (the admin); with nats_password_file"
    )
    nats_password_file: Path | None = Field(
        None, description="File holding the password of nats_user"
    )
    tenant: str = Field(
        DEFAULT_TENANT,
        pattern=TENANT_PATTERN,
        description="The team this client submits as: its credential (submitter.<tenant>.nk, "
        "written by `metatune secrets --tenant`), its datasets bucket, its studies",
    )
    nats_secrets_dir: Path | None = Field(
        None,
        description="Where `metatune up` / `metatune secrets` keep NATS credentials (default: <data dir>/secrets/nats); "
        "the CLI's fallback credentials",
    )
    nats_tls_ca_file: Path | None = Field(
        None,
        description="CA of the NATS servers' certificates: set, every connection uses TLS and verifies the server",
    )
    nats_tls_cert_file: Path | None = Field(
        None, description="Client certificate presented over TLS (servers that verify clients)"
    )
    nats_tls_key_file: Path | None = Field(None, description="Private key of nats_tls_cert_file")

    # Bus
    stream_name: str = Field("METATUNE", description="JetStream stream of the durable event log")
    status_stream_name: str = Field(
        "METATUNE_STATUS", description="JetStream stream of heartbeats and ticks"
    )
    stream_replicas: int = Field(1, ge=1, le=5, description="JetStream replicas (3 in a cluster)")
    dedup_window_s: float = Field(
        120.0, gt=0, description="JetStream de-duplication window in seconds"
    )
    max_deliver: int = Field(
        5, ge=1, description="Deliveries of one message before it is dead-lettered"
    )
    retry_backoff_s: float = Field(
        1.0, gt=0, description="First redelivery delay; doubles per attempt"
    )
    ack_wait_s: float = Field(
        300.0, gt=0, description="Seconds a handler may hold a message before redelivery"
    )
    shutdown_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds a service's shutdown (consumers, drain, close) may take before it is abandoned",
    )

    # Clock
    clock: Literal["real", "simulated"] = Field("real", description="Wall-clock or simulated hours")
    sim_seconds_per_hour: float = Field(10.0, gt=0, description="Real seconds per simulated hour")
    sim_start: AwareDatetime | None = Field(
        None,
        description="Simulated start time, ISO 8601 with a zone (default: now, floored to the hour)",
    )

    # Service identity and health
    service_name: str = Field(
        "",
        description="Name this process reports in health, logs and errors (empty: the service's own name)",
    )
    heartbeat_s: float = Field(2.0, gt=0, description="Seconds between health heartbeats")

    # Limits on user input
    max_dataset_bytes: int = Field(
        2 * 1024**3, gt=0, description="Largest dataset accepted, in bytes"
    )
    max_row_bytes: int = Field(1024**2, gt=0, description="Largest single row accepted, in bytes")
    max_message_bytes: int = Field(
        1024**2,
        gt=0,
        description="Largest bus message a service accepts; larger ones become error events",
    )
    dataset_roots: list[Path] = Field(
        default_factory=list,
        description="Directories 'path' datasets must resolve under, enforced by profiler and agent "
        "(empty: the data directory)",
    )
    allow_url_datasets: bool = Field(
        False, description="Accept 'url' dataset locations (http(s) to public addresses)"
    )
    url_allowed_networks: list[str] = Field(
        default_factory=list,
        description="CIDR networks URL datasets may reach besides public addresses (e.g. 127.0.0.0/8 in tests)",
    )
    url_timeout_s: float = Field(
        30.0, gt=0, description="Seconds without progress before a download fails"
    )

    # Datacenters and their agents
    datacenter: str = Field("", description="Datacenter this trainer-agent serves")
    registry_path: Path | None = Field(
        None,
        description="Datacenter registry file (default: the embedded one); every service, the CLI, "
        "`metatune secrets` and the bus permissions read this one",
    )
    agent_status_interval_s: float = Field(
        5.0, gt=0, description="Real seconds between agent status heartbeats"
    )

    # Telemetry's address and keys, which the CLI and submitters read too
    telemetry_http_port: int = Field(
        8090, ge=0, le=65535, description="Port of the telemetry API and dashboard; 0: off"
    )
    dashboard_tokens_dir: Path | None = Field(
        None,
        description="Folder of the dashboard's read-only tokens (`metatune secrets` writes them); "
        "default: the NATS secrets dir",
    )
    webhook_key_file: Path | None = Field(
        None,
        description="Telemetry's key that opens sealed webhook URLs (made 0600 if absent; "
        "default <data dir>/secrets/telemetry/webhook.key)",
    )
    webhook_public_key: str = Field(
        "",
        description="Telemetry's public key a submitter seals a webhook URL's credentials with; "
        "empty: the webhook.pub beside webhook_key_file",
    )

    @classmethod
    def of(cls, settings: Settings | None) -> Self:
        """``settings`` as this class: a service handed the platform's settings (a test's, the
        CLI's) keeps their values and reads its own fields from the environment."""
        if isinstance(settings, cls):
            return settings
        if settings is None:
            return cls()
        return cls(**settings.model_dump())

    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser().resolve()

    def resolved_nats_secrets_dir(self) -> Path:
        return (
            (self.nats_secrets_dir or self.resolved_data_dir() / "secrets" / "nats")
            .expanduser()
            .resolve()
        )

    def registry(self) -> Registry:
        """The datacenter registry: the file at ``registry_path``, else the embedded one. The one
        place it is resolved: every service, the CLI, ``metatune secrets`` and the bus
        permissions read it here."""
        from .registry import load_registry

        return load_registry(self.registry_path)

    def dataset_root_paths(self) -> list[Path]:
        """Where local dataset paths may point: the configured roots, else the data directory."""
        return [root.expanduser().resolve() for root in self.dataset_roots] or [
            self.resolved_data_dir()
        ]


@lru_cache
def get_settings() -> Settings:
    """Settings of this process, read once."""
    return Settings()


def settings_field_names(cls: type[Settings] = Settings) -> set[str]:
    """The environment variables ``cls`` reads (the compose-file check: a service's settings
    class, the platform's and its own)."""
    return {f"METATUNE_{name.upper()}" for name in cls.model_fields}


__all__ = ["Settings", "get_settings", "settings_field_names"]
