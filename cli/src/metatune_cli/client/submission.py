"""What a submission asks for, checked before anything is uploaded or published.

The dataset is a local file (uploaded), a study file (docs/study.schema.json) naming one, or a key
already in the datasets bucket. Each setting comes from the caller, else the study file, else
:data:`DEFAULTS`; a message about a setting names where it came from (``study.yaml: field:`` for
the file's, the caller's option name otherwise: the CLI's flags, the client's keywords).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any
from uuid import UUID, uuid4

from pydantic import ValidationError

from metatune.contracts import (
    CarbonPreference,
    DatasetLocation,
    RegionGroup,
    StudySpec,
    TaskType,
    TrainingBudget,
)
from metatune.errors import ConfigurationError
from metatune.settings import Settings
from metatune.webhook_seal import seal_for_telemetry

from ..study_file import SUFFIXES as STUDY_SUFFIXES
from ..study_file import StudyFileError, is_study_file, parse_deadline, read_study_file
from .errors import InvalidRequest
from .validation import (
    check_base_model,
    check_datacenter,
    check_gpus_per_trial,
    check_home_in_group,
    one_line,
)

DEFAULTS: dict[str, Any] = {
    "base_model": "all-MiniLM-L6-v2",
    "task": TaskType.classification,
    "deadline": "24h",
    "trials": 3,
    "gpus_per_trial": 1,
    "carbon_preference": CarbonPreference.greenest,
}
# every setting a submission takes (a study file's fields, less its dataset)
OPTIONS = (
    "base_model",
    "task",
    "deadline",
    "name",
    "tags",
    "trials",
    "budget",
    "gpus_per_trial",
    "webhook",
    "region_group",
    "home_datacenter",
    "carbon_preference",
    "text_column",
    "text_pair_column",
    "label_column",
)


@dataclass(frozen=True)
class Sources:
    """The dataset and each setting, with where it came from (the caller, the study file, a
    default): what the messages about a setting start with."""

    settings: dict[str, Any]
    option_name: Callable[[str], str]
    dataset: Path | None = None
    object_key: str | None = None
    study_file: Path | None = None
    from_file: frozenset[str] = frozenset()

    def where(self, field: str) -> str:
        """What a message about ``field`` starts with: ``study.yaml: field: `` for the file's."""
        return f"{self.study_file}: {field}: " if field in self.from_file else ""

    def named(self, field: str) -> str:
        """How a message names ``field``'s value: ``study.yaml: field:`` or its option."""
        return (
            f"{self.study_file}: {field}:" if field in self.from_file else self.option_name(field)
        )

    def label(self, field: str) -> str:
        return field if field in self.from_file else self.option_name(field)

    @property
    def dataset_name(self) -> str:
        """The dataset's file name (for the upload's key and the study's default name)."""
        if self.dataset is not None:
            return self.dataset.name
        return PurePosixPath(self.object_key or "dataset").name


@dataclass(frozen=True)
class Draft:
    """A checked submission, ready to publish: the spec (its deadline from now; a relative one is
    read again against the platform's clock when published) and the file to upload, if any."""

    study_id: UUID
    spec: StudySpec
    deadline: str
    dataset: Path | None
    missing_key: str  # what a message about a stored dataset that is not there starts with


def resolve(
    source: Path | None,
    object_key: str | None,
    options: dict[str, Any],
    option_name: Callable[[str], str] = str,
    *,
    allow_dataset_outside: bool = False,
) -> Sources:
    """The dataset and the settings: those given, else the study file's (when ``source`` is one),
    else the defaults. A study file that does not validate, or names a dataset that is not a
    readable file or (unless ``allow_dataset_outside``) lies outside the file's folder, is
    :class:`InvalidRequest` before anything is uploaded."""
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise InvalidRequest(f"unknown submission option(s): {', '.join(sorted(unknown))}")
    given = {k: v for k, v in options.items() if v is not None}
    if (source is None) == (object_key is None):
        raise InvalidRequest("give either a dataset or study file, or the object key of a dataset")
    if source is not None and not source.is_file():
        raise InvalidRequest(f"{source} is not a readable file")
    if source is None or not is_study_file(source):
        chosen = {**DEFAULTS, **given}
        picked = {key: chosen.get(key) for key in OPTIONS}
        return Sources(picked, option_name, dataset=source, object_key=object_key)
    try:
        study = read_study_file(source)
        dataset = study.dataset_path(source, anywhere=allow_dataset_outside)
    except StudyFileError as exc:
        raise InvalidRequest(str(exc)) from None
    if dataset is not None:
        if not dataset.is_file():
            raise InvalidRequest(f"{source}: dataset: {dataset} is not a readable file")
        if dataset.suffix.lower() in STUDY_SUFFIXES:
            raise InvalidRequest(f"{source}: dataset: {dataset} is a study file, not a dataset")
    from_file = study.model_dump(exclude={"dataset"}, exclude_none=True)
    chosen = {**DEFAULTS, **from_file, **given}
    chosen["budget"] = merged_budget(from_file.get("budget"), given.get("budget"))
    return Sources(
        {key: chosen.get(key) for key in OPTIONS},
        option_name,
        dataset=dataset,
        object_key=study.object_key(),
        study_file=source,
        from_file=frozenset(from_file) - frozenset(given),
    )


def draft(sub: Sources, settings: Settings) -> Draft:
    """Every setting checked (:class:`InvalidRequest`, one line), the spec drafted."""
    chosen = sub.settings
    study_id = uuid4()
    key = sub.object_key or f"studies/{study_id}/{sub.dataset_name}"
    check_base_model(chosen["base_model"], sub.where("base_model"))
    home, group = chosen["home_datacenter"], _region_group(chosen["region_group"], sub)
    if home is not None:
        check_datacenter(home, settings, sub.where("home_datacenter"))
        if group is not None:
            home_name = sub.named("home_datacenter")
            if "region_group" in sub.from_file and "home_datacenter" not in sub.from_file:
                home_name = f"{sub.named('region_group')} {home_name}"
            check_home_in_group(home, group, settings, home_name, sub.label("region_group"))
    check_gpus_per_trial(chosen["gpus_per_trial"], settings, sub.named("gpus_per_trial"))
    try:
        spec = StudySpec(
            name=chosen["name"] or sub.dataset_name.split(".")[0],
            tags=chosen["tags"] or (),
            dataset=DatasetLocation(kind="object", ref=key),
            task=chosen["task"],
            base_model=chosen["base_model"],
            deadline=parse_deadline(chosen["deadline"], datetime.now(UTC)),
            trials=chosen["trials"],
            budget=_budget(chosen["budget"], sub),
            gpus_per_trial=chosen["gpus_per_trial"],
            webhook_url=chosen["webhook"],
            region_group=group,
            home_datacenter=home,
            carbon_preference=chosen["carbon_preference"],
            text_column=chosen["text_column"],
            text_pair_column=chosen["text_pair_column"],
            label_column=chosen["label_column"],
        )
        if spec.webhook_url is not None:  # its credentials leave sealed, for telemetry only
            public, sealed = seal_for_telemetry(str(spec.webhook_url), settings)
            spec = StudySpec.model_validate(
                {**spec.model_dump(), "webhook_url": public, "webhook_sealed": sealed}
            )
    except ValidationError as exc:
        raise InvalidRequest(f"invalid submission: {one_line(exc)}") from None
    except (ValueError, ConfigurationError) as exc:  # a deadline that does not parse; the seal
        raise InvalidRequest(str(exc)) from None
    missing_key = f"{sub.study_file}: dataset.object_key: " if sub.study_file else "object_key: "
    return Draft(study_id, spec, chosen["deadline"], sub.dataset, missing_key)


def merged_budget(
    from_file: dict[str, Any] | None, given: TrainingBudget | dict[str, Any] | None
) -> dict[str, Any] | None:
    """The study file's budget with the caller's fields over it; a length given (epochs or
    max_steps) replaces the file's, whichever unit the file used."""
    if isinstance(given, TrainingBudget):
        given = given.model_dump()
    if not given:
        return from_file
    base = dict(from_file or {})
    if {"epochs", "max_steps"} & set(given):
        base.pop("epochs", None)
        base.pop("max_steps", None)
    return {**base, **given}


def _budget(value: TrainingBudget | dict[str, Any] | None, sub: Sources) -> TrainingBudget:
    if isinstance(value, TrainingBudget):
        return value
    try:
        return TrainingBudget.model_validate(value or {})
    except ValidationError as exc:
        raise InvalidRequest(f"{sub.where('budget')}invalid budget: {one_line(exc)}") from None


def _region_group(value: Any, sub: Sources) -> RegionGroup | None:
    if value is None or isinstance(value, RegionGroup):
        return value
    try:
        return RegionGroup(value)
    except ValueError:
        known = ", ".join(g.value for g in RegionGroup)
        raise InvalidRequest(
            f"{sub.where('region_group')}{value!r} is not a region group ({known})"
        ) from None
