"""Validate a bus message against the contract of its subject, and make any valid payload storable.

Pure functions (no bus, no database): :func:`classify` turns ``(subject, bytes)`` into an
:class:`Accepted` event (the validated model plus the JSON to store) or a :class:`Rejected`
message (a machine code and a reason), by the contract :func:`metatune.catalog.contract_for`
gives the subject. PostgreSQL's ``jsonb`` and ``text`` refuse the NUL
character (and lone UTF-16 surrogates), which a valid event may carry inside a string (an error
event quoting a bad row does exactly that): such a payload is stored with those characters
replaced by U+FFFD and its exact bytes kept beside it, so nothing is lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from metatune.catalog import contract_for
from metatune.contracts import Event, validation_summary

REPLACEMENT = "\ufffd"


@dataclass(frozen=True, slots=True)
class Accepted:
    subject: str
    event: Event
    payload_json: str  # what goes into jsonb: the message as published, NUL-free
    raw: bytes | None  # the exact bytes where payload_json had to differ from them


@dataclass(frozen=True, slots=True)
class Rejected:
    subject: str
    code: str  # unknown_subject | invalid_message
    reason: str


def clean_text(value: str) -> str:
    """``value`` without the characters PostgreSQL text cannot hold (NUL, lone surrogates)."""
    if value.isascii():  # the common case, known without a scan: no surrogate possible
        return value.replace("\x00", REPLACEMENT) if "\x00" in value else value
    if "\x00" in value:
        value = value.replace("\x00", REPLACEMENT)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None  # jsonb has no NaN / Infinity; the exact bytes are kept in ``raw``
    if isinstance(value, dict):
        return {clean_text(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def storable_json(data: bytes) -> tuple[str, bytes | None]:
    """(JSON text jsonb accepts, the original bytes if the text had to change)."""
    if b"\\u" not in data and b"NaN" not in data and b"Infinity" not in data:
        return data.decode("utf-8"), None
    cleaned = json.dumps(_clean(json.loads(data)), ensure_ascii=False, allow_nan=False)
    return cleaned, (None if cleaned.encode() == data else data)


def classify(subject: str, data: bytes) -> Accepted | Rejected:
    """Validate ``data`` against the contract of ``subject``."""
    model = contract_for(subject)
    if model is None:
        return Rejected(
            subject, "unknown_subject", f"no MetaTune contract for subject {clean_text(subject)!r}"
        )
    try:
        event = model.model_validate_json(data)
    except ValidationError as exc:
        return Rejected(
            subject,
            "invalid_message",
            clean_text(f"not a valid {model.__name__}: {validation_summary(exc)}"),
        )
    if "event_id" not in event.model_fields_set:  # a generated id would store each redelivery anew
        return Rejected(
            subject, "invalid_message", f"not a valid {model.__name__}: event_id: Field required"
        )
    payload, raw = storable_json(data)
    return Accepted(subject, event, payload, raw)
