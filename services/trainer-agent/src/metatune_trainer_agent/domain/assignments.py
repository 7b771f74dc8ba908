"""Reading an assignment so that a bad LoRA configuration fails the *run*, not the message.

A well-formed assignment whose configuration is out of range (rank 0, a negative learning
rate) must become ``runs.failed`` with reason ``invalid_config`` for its job; only a message
that cannot even name its job is an invalid message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from metatune.contracts import Assignment

from .request import describe


@dataclass(frozen=True)
class ParsedAssignment:
    assignment: Assignment
    config_error: str | None = None  # set when only the LoRA configuration was invalid


def parse_assignment(raw: dict[str, Any]) -> ParsedAssignment:
    """Validate ``raw``; raises :class:`ValidationError` when more than the config is wrong."""
    try:
        return ParsedAssignment(Assignment.model_validate(raw))
    except ValidationError as exc:
        if not exc.errors() or any(err["loc"][:1] != ("config",) for err in exc.errors()):
            raise
        assignment = Assignment.model_validate({**raw, "config": None})
        return ParsedAssignment(
            assignment, config_error=f"invalid LoRA configuration: {describe(exc)}"
        )
