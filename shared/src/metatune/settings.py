"""All MetaTune settings, read from ``METATUNE_*`` environment variables (and a ``.env`` file).

One class for the whole platform so that every service, the CLI and the compose file agree on
names; a service reads only the fields it needs. The README's configuration table lists them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from pydantic import AwareDatetime, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


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

    # Profiler
    profiler_sample_size: int = Field(
        4096, ge=1, description="Reservoir rows behind tokenizer features"
    )
    profiler_seed: int = Field(
        0, description="Seed of the reservoir sample and of the padding simulation"
    )
    profiler_mattr_window: int = Field(500, ge=1, description="Tokens per MATTR window")
    profiler_max_skipped_fraction: float = Field(
        0.1, ge=0, le=1, description="Share of bad rows that fails a file"
    )

    # Transient bus errors (uploads and publishes that must not be lost)
    bus_retry_budget_s: float = Field(
        180.0,
        gt=0,
        description="Seconds an upload or publish is retried through a bus outage before it counts as failed",
    )
    bus_retry_initial_s: float = Field(
        0.5, gt=0, description="First retry delay of a failed upload or publish; doubles"
    )
    bus_retry_max_s: float = Field(
        10.0, gt=0, description="Longest delay between two retries of an upload or publish"
    )

    # Trainer agent (one process per datacenter)
    datacenter: str = Field("", description="Datacenter this trainer-agent serves")
    registry_path: Path | None = Field(
        None, description="Datacenter registry file (default: the embedded one)"
    )
    agent_device: str = Field(
        "auto", description="torch device for runs: auto (CUDA when present), cpu, cuda"
    )
    agent_checkpoint_every: int = Field(
        50, ge=1, description="Optimizer steps between checkpoints to the object store"
    )
    agent_progress_interval_s: float = Field(
        2.0, ge=0, description="Least real seconds between two progress events"
    )
    agent_status_interval_s: float = Field(
        5.0, gt=0, description="Real seconds between agent status heartbeats"
    )
    agent_idle_seconds: float = Field(
        1.0, ge=0, description="Seconds the idle power baseline is measured per run"
    )
    agent_watts_per_core: float = Field(
        12.0, gt=0, description="CPU power model (W per busy core) when RAPL is unreadable"
    )
    agent_max_eval_examples: int = Field(
        512, ge=1, description="Held-out examples per periodic evaluation"
    )
    agent_curve_stop: bool = Field(
        True, description="Stop a trial whose predicted final metric cannot beat its study's best"
    )
    agent_curve_stop_confidence: float = Field(
        0.95,
        gt=0,
        lt=1,
        description="Confidence of the predicted final metric's upper bound the curve stopper compares",
    )
    agent_curve_stop_margin: float = Field(
        0.0, ge=0, description="Stop only when the upper bound is below best - margin"
    )
    agent_curve_stop_model: Path | None = Field(
        None,
        description="Curve-stop model file (default: the one shipped in the trainer-agent package)",
    )

    # Forecaster
    forecaster_weather: Literal["replay", "open-meteo"] = Field(
        "replay",
        description="Forecaster weather source: the embedded replay extract, or the Open-Meteo API",
    )
    forecaster_model_path: Path | None = Field(
        None,
        description="Forecaster model artifact (default: the one embedded in the forecaster package)",
    )
    forecaster_replay_path: Path | None = Field(
        None,
        description="Replay extract of intensity history and weather (default: the embedded one)",
    )
    forecaster_weather_error_path: Path | None = Field(
        None, description="Forecast-error model of the replayed weather (default: the embedded one)"
    )
    open_meteo_url: str = Field(
        "https://api.open-meteo.com/v1/forecast", description="Open-Meteo forecast endpoint"
    )
    open_meteo_timeout_s: float = Field(10.0, gt=0, description="Seconds per Open-Meteo request")
    open_meteo_retries: int = Field(
        3, ge=0, description="Retries of a failed Open-Meteo request (timeouts, 429, 5xx)"
    )
    open_meteo_backoff_s: float = Field(
        1.0, ge=0, description="First Open-Meteo retry delay in seconds, doubled per retry"
    )

    # Live intensity sources (which one feeds a region: intensity_source in the registry)
    electricitymaps_url: str = Field(
        "https://api.electricitymaps.com", description="Electricity Maps API base URL"
    )
    electricitymaps_token_file: Path | None = Field(
        None, description="File holding the Electricity Maps API token (auth-token header)"
    )
    electricitymaps_forecast: bool = Field(
        False, description="Read Electricity Maps' own forecast (plans that include /forecast)"
    )
    watttime_url: str = Field("https://api.watttime.org", description="WattTime API base URL")
    watttime_username: str = Field("", description="WattTime API user name")
    watttime_password_file: Path | None = Field(
        None, description="File holding the password of watttime_username"
    )
    uk_carbon_intensity_url: str = Field(
        "https://api.carbonintensity.org.uk",
        description="GB Carbon Intensity API base URL (free, no key)",
    )
    carbon_aware_sdk_url: str = Field(
        "http://127.0.0.1:8080", description="Base URL of a Carbon Aware SDK WebAPI you run"
    )
    carbon_aware_sdk_signal: Literal["average", "marginal"] = Field(
        "marginal",
        description="What the Carbon Aware SDK's data source measures: marginal (WattTime) or average (Electricity Maps)",
    )
    intensity_timeout_s: float = Field(
        10.0, gt=0, description="Seconds per request to an intensity source"
    )
    intensity_retry_budget_s: float = Field(
        60.0,
        ge=0,
        description="Seconds a failing intensity request (429, 5xx, timeouts) is retried before the source counts as down",
    )
    intensity_retry_initial_s: float = Field(
        1.0, gt=0, description="First retry delay of an intensity request; doubles"
    )
    intensity_retry_max_s: float = Field(
        30.0,
        gt=0,
        description="Longest backoff between two intensity requests (Retry-After may ask more)",
    )

    # Scheduler
    agent_lease_s: float = Field(
        20.0,
        gt=0,
        description="Real seconds an agent may stay silent (no status heartbeat) before the scheduler declares it lost and re-plans its jobs from their checkpoints",
    )
    scheduler_anticipate_h: int = Field(
        0,
        ge=0,
        le=72,
        description="Hours ahead the scheduler keeps room for expected jobs (requests of past days at the same hours); "
        "0: none (see the scheduler README)",
    )
    scheduler_anticipation_days: int = Field(
        1,
        ge=1,
        le=14,
        description="Past days whose requests, each counted 1/N, make the expected demand of an hour",
    )
    scheduler_anticipated_quantile: float = Field(
        0.5,
        ge=0,
        le=1,
        description="An expected job's unplanned hour costs this quantile of its usable hours "
        "(1: the dearest); lower: fewer requested jobs displaced",
    )

    scheduler_delay_premium: float = Field(
        0.03,
        ge=0,
        description="gCO2eq/kWh added to the forecast per hour of delay, so of two nearly as clean hours the earlier wins",
    )
    scheduler_hysteresis_share: float = Field(
        0.05,
        ge=0,
        lt=1,
        description="A job whose planned start is near keeps it unless a re-plan moving it saves more than this share of its emissions; 0: no hysteresis",
    )
    scheduler_hysteresis_near_h: int = Field(
        6,
        ge=0,
        le=168,
        description="Hours ahead within which a job's planned start counts as near (scheduler hysteresis)",
    )
    scheduler_min_run_h: float = Field(
        1.0,
        ge=0,
        description="Clock hours a started or resumed job runs, on top of its measured start-up, before it may be paused or moved (and not before a new checkpoint)",
    )
    scheduler_startup_wall_s: float = Field(
        30.0,
        ge=0,
        description="Real seconds a start or resume is assumed to cost (loading model and data) until an agent has measured one (converted to clock hours)",
    )

    # Telemetry (event log, webhooks, dashboard)
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
    telemetry_http_port: int = Field(
        8090, ge=0, le=65535, description="Port of the telemetry API and dashboard; 0: off"
    )
    dashboard_tokens_dir: Path | None = Field(
        None,
        description="Folder of the dashboard's read-only tokens (`metatune secrets` writes them); "
        "default: the NATS secrets dir",
    )
    webhook_secret: str = Field(
        "",
        description="Standard Webhooks signing secret (whsec_...); empty: one is generated and kept in the database",
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
        description="MLflow tracking URI telemetry exports each study to when it completes "
        "(needs `pip install metatune-telemetry[mlflow]`); unset: off",
    )

    # Embedded platform (`metatune up`)
    local_datacenters: list[str] = Field(
        ["fra1", "osl1", "sjc1"],
        description="Datacenters whose trainer-agent `metatune up` starts locally",
    )

    # CLI
    up_timeout_s: float = Field(
        60.0, gt=0, description="Seconds `metatune up` waits for services to be healthy"
    )

    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser().resolve()

    def resolved_nats_secrets_dir(self) -> Path:
        return (
            (self.nats_secrets_dir or self.resolved_data_dir() / "secrets" / "nats")
            .expanduser()
            .resolve()
        )

    def dataset_root_paths(self) -> list[Path]:
        """Where local dataset paths may point: the configured roots, else the data directory."""
        return [root.expanduser().resolve() for root in self.dataset_roots] or [
            self.resolved_data_dir()
        ]


@lru_cache
def get_settings() -> Settings:
    """Settings of this process, read once."""
    return Settings()


def settings_field_names() -> set[str]:
    """Environment variable names the code knows (used by the compose-file check)."""
    return {f"METATUNE_{name.upper()}" for name in Settings.model_fields}


__all__ = ["Settings", "get_settings", "settings_field_names"]
