"""All MetaTune settings, read from ``METATUNE_*`` environment variables (and a ``.env`` file).

One class for the whole platform so that every service, the CLI and the compose file agree on
names; a service reads only the fields it needs. The README's configuration table lists them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="METATUNE_", env_file=".env", extra="ignore")

    # Infrastructure
    nats_url: str = Field("nats://127.0.0.1:4222", description="NATS server URL (JetStream enabled)")
    database_url: str = Field(
        "postgresql://postgres@127.0.0.1:5432/test", description="PostgreSQL / TimescaleDB URL"
    )
    data_dir: Path = Field(Path(".metatune"), description="Where embedded servers, caches and run state live")
    connect_timeout_s: float = Field(2.0, gt=0, description="Seconds to wait for NATS / PostgreSQL to answer")

    # Bus
    stream_name: str = Field("METATUNE", description="JetStream stream of the durable event log")
    status_stream_name: str = Field("METATUNE_STATUS", description="JetStream stream of heartbeats and ticks")
    stream_replicas: int = Field(1, ge=1, le=5, description="JetStream replicas (3 in a cluster)")
    dedup_window_s: float = Field(120.0, gt=0, description="JetStream de-duplication window in seconds")
    max_deliver: int = Field(5, ge=1, description="Deliveries of one message before it is dead-lettered")
    retry_backoff_s: float = Field(1.0, gt=0, description="First redelivery delay; doubles per attempt")
    ack_wait_s: float = Field(300.0, gt=0, description="Seconds a handler may hold a message before redelivery")

    # Clock
    clock: Literal["real", "simulated"] = Field("real", description="Wall-clock or simulated hours")
    sim_seconds_per_hour: float = Field(10.0, gt=0, description="Real seconds per simulated hour")
    sim_start: AwareDatetime | None = Field(None, description="Simulated start time (default: now, floored to the hour)")

    # Service identity and health
    service_name: str = Field("", description="Name this process reports in health and errors")
    heartbeat_s: float = Field(2.0, gt=0, description="Seconds between health heartbeats")

    # Limits on user input
    max_dataset_bytes: int = Field(2 * 1024**3, gt=0, description="Largest dataset accepted, in bytes")
    max_row_bytes: int = Field(1024**2, gt=0, description="Largest single row accepted, in bytes")

    # Trainer agent (one process per datacenter)
    datacenter: str = Field("", description="Datacenter this trainer-agent serves")
    registry_path: Path | None = Field(None, description="Datacenter registry file (default: the embedded one)")

    # Embedded platform (`metatune up`)
    local_datacenters: list[str] = Field(
        ["fra1", "osl1", "sjc1"], description="Datacenters whose trainer-agent `metatune up` starts locally"
    )

    # CLI
    up_timeout_s: float = Field(60.0, gt=0, description="Seconds `metatune up` waits for services to be healthy")

    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser().resolve()


@lru_cache
def get_settings() -> Settings:
    """Settings of this process, read once."""
    return Settings()


def settings_field_names() -> set[str]:
    """Environment variable names the code knows (used by the compose-file check)."""
    return {f"METATUNE_{name.upper()}" for name in Settings.model_fields}


__all__ = ["Settings", "get_settings", "settings_field_names"]
