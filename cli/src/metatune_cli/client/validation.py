"""Checking what a caller asked for before anything is published: one line per mistake."""

from __future__ import annotations

from uuid import UUID

from pydantic import ValidationError

from metatune.contracts import RegionGroup
from metatune.models import UnknownBaseModel, resolve_base_model
from metatune.settings import Settings

from .errors import InvalidRequest


def one_line(exc: ValidationError) -> str:
    """A pydantic error as ``field: reason; field: reason``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'value'}: {error['msg']}"
        for error in exc.errors()
    )


def parse_id(value: UUID | str, what: str) -> UUID:
    """``value`` as a UUID, or :class:`InvalidRequest` saying what a ``what`` id looks like."""
    if isinstance(value, UUID):
        return value
    try:
        return UUID(value)
    except ValueError:
        raise InvalidRequest(
            f"{value!r} is not a {what} id (a UUID, as `metatune events` shows)"
        ) from None


# ``where`` and the ``*_name`` arguments say where a value came from: nothing and the option's
# name by default, ``study.yaml: field:`` for a study file's (metatune_cli.study_file).
def check_datacenter(name: str, settings: Settings, where: str = "") -> str:
    registry = settings.registry()
    if name not in registry.names():
        raise InvalidRequest(
            f"{where}unknown datacenter {name!r}; known: {', '.join(registry.names())}"
        )
    return name


def check_home_in_group(
    home: str, group: RegionGroup, settings: Settings, home_name: str, group_name: str
) -> None:
    """A home datacenter outside the study's residency group could never run its trials."""
    allowed = [dc.name for dc in settings.registry().in_group(group)]
    if home not in allowed:
        raise InvalidRequest(
            f"{home_name} {home} is outside {group_name} {group.value} "
            f"({', '.join(allowed) or 'no datacenter'})"
        )


def check_gpus_per_trial(gpus: int, settings: Settings, name: str) -> int:
    """A trial trains in one datacenter: some datacenter must have that many GPUs."""
    registry = settings.registry()
    largest = max(registry.get(dc).gpus for dc in registry.names())
    if gpus > largest:
        raise InvalidRequest(f"{name} {gpus}: the largest datacenter has {largest} GPUs")
    return gpus


def check_base_model(name: str, where: str = "") -> str:
    try:
        resolve_base_model(name)
    except UnknownBaseModel as exc:
        raise InvalidRequest(f"{where}{exc}") from None
    return name
