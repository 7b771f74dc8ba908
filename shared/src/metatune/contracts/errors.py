"""Typed error event: what went wrong with a message or a request, for the submitter."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from .base import Event


class ErrorKind(StrEnum):
    invalid_message = "invalid_message"  # failed contract validation
    handler_failed = "handler_failed"  # raised after all retries: dead-lettered
    bad_input = "bad_input"  # well-formed message, unusable content (e.g. a dataset)
    unavailable = "unavailable"  # a dependency (provider, store) did not answer


class ErrorEvent(Event):
    service: str = Field(description="the service that reports it (also the subject's last token)")
    kind: ErrorKind = Field(description="invalid_message, handler_failed, bad_input or unavailable")
    code: str = Field(description="machine-readable reason, e.g. not_utf8, empty_file")
    message: str = Field(description="human-readable reason")
    subject: str | None = Field(None, description="subject of the message that caused it")
    payload_excerpt: str | None = Field(
        None, max_length=4096, description="start of the offending message, secrets masked"
    )
    row: int | None = Field(None, ge=0, description="1-based row number where one applies")
    deliveries: int | None = Field(
        None, ge=1, description="deliveries of the message when it was dead-lettered"
    )
    details: dict[str, Any] = Field(default_factory=dict, description="further context, per code")
