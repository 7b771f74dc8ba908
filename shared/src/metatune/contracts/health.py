"""Service heartbeat stored in the KV bucket ``metatune_health`` (key = instance name)."""

from __future__ import annotations

from pydantic import Field

from .base import Contract


class ServiceHealth(Contract):
    service: str
    instance: str = Field(description="unique per process, e.g. trainer-agent.fra1")
    pid: int
    host: str
    version: str
    started_at: float = Field(description="Unix time the process started")
    heartbeat_at: float = Field(description="Unix time of this heartbeat (wall clock)")
    status: str = "ok"
    details: dict[str, str] = Field(default_factory=dict)
