"""The envelope every MetaTune message shares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, ClassVar, Self
from uuid import UUID, uuid4

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

SCHEMA_VERSION = 1


def validation_summary(exc: ValidationError, shown: int = 5) -> str:
    """The first ``shown`` errors of a payload that failed its contract, one ``field: message``
    each (for error events and rejects, where the whole error would be too long)."""
    parts = []
    for err in exc.errors()[:shown]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
        parts.append(f"{loc}: {err.get('msg')}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class Contract(BaseModel):
    """Strict base of every payload and sub-model: unknown fields are an error, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Event(Contract):
    """Envelope: identity (``event_id`` is also the JetStream ``Nats-Msg-Id``), time, version.

    ``correlation_id`` ties every event of one study or job together; subclasses fill it from
    their ``job_id`` / ``study_id`` when the publisher does not set it.
    """

    subject_hint: ClassVar[str] = ""

    schema_version: int = Field(
        SCHEMA_VERSION,
        ge=1,
        le=SCHEMA_VERSION,
        description="contract version; a consumer refuses a version it does not know",
    )
    event_id: UUID = Field(
        default_factory=uuid4,
        description=(
            "unique id of this event; sent as the Nats-Msg-Id header unless the producer derives one, so a "
            "re-publish inside the de-duplication window is stored once"
        ),
    )
    occurred_at: AwareDatetime = Field(
        description="When it happened, timezone-aware, normalised to UTC"
    )
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

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """On the wire ``event_id`` is required: it is the de-duplication key, and a consumer that
        had to invent one could not recognise a redelivery."""
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        target["required"] = [
            "event_id",
            *[f for f in target.get("required", []) if f != "event_id"],
        ]
        return schema

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()


JobId = Annotated[UUID, Field(description="the job (one trial of a study)")]
StudyId = Annotated[UUID, Field(description="the study (one submission) the event belongs to")]
OptionalStudyId = Annotated[
    UUID | None, Field(description="the study the job belongs to, where the producer knows it")
]
DatacenterName = Annotated[str, Field(description="datacenter name from the registry, e.g. fra1")]


def utc(value: datetime) -> datetime:
    """Validate that ``value`` is timezone-aware and return it in UTC."""
    if value.tzinfo is None:
        raise ValueError("datetime must be timezone-aware")
    return value.astimezone(UTC)
