"""The envelope every MetaTune message shares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar, Self
from uuid import UUID, uuid4

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA_VERSION = 1


class Contract(BaseModel):
    """Strict base of every payload and sub-model: unknown fields are an error, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Event(Contract):
    """Envelope: identity (``event_id`` is also the JetStream ``Nats-Msg-Id``), time, version.

    ``correlation_id`` ties every event of one study or job together; subclasses fill it from
    their ``job_id`` / ``study_id`` when the publisher does not set it.
    """

    subject_hint: ClassVar[str] = ""

    schema_version: int = Field(SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    event_id: UUID = Field(default_factory=uuid4)
    occurred_at: AwareDatetime = Field(description="When it happened, timezone-aware, normalised to UTC")
    correlation_id: str | None = Field(None, description="study_id or job_id this event belongs to")

    @field_validator("occurred_at")
    @classmethod
    def _to_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @model_validator(mode="after")
    def _fill_correlation(self) -> Self:
        if self.correlation_id is None:
            for name in ("job_id", "study_id"):
                value = getattr(self, name, None)
                if value is not None:
                    object.__setattr__(self, "correlation_id", str(value))
                    break
        return self

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()


def utc(value: datetime) -> datetime:
    """Validate that ``value`` is timezone-aware and return it in UTC."""
    if value.tzinfo is None:
        raise ValueError("datetime must be timezone-aware")
    return value.astimezone(UTC)
