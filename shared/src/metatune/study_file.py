"""Study files: a study a team can review and commit, submitted with ``metatune submit study.yaml``.

A YAML (or JSON) mapping of the submission's settings, checked against :class:`StudyFile` (its
JSON Schema is published as ``docs/study.schema.json``) before anything is uploaded. ``dataset``
is a path relative to the study file. Every field but ``dataset`` may be left out (the
command's defaults apply) and every field the command has a flag for may be overridden by it.

    name: snips-intents
    dataset: snips_intents_2k.jsonl
    task: classification
    deadline: 3d
    carbon_preference: balanced
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .contracts import CarbonPreference, RegionGroup, TaskType
from .errors import MetaTuneError

SUFFIXES = (".yaml", ".yml")


class StudyFileError(MetaTuneError, ValueError):
    """A study file that cannot be read or does not validate; the message is one line naming the
    file and the field."""


class StudyFile(BaseModel):
    """What a study file may hold: the options of ``metatune submit``, by the same names."""

    model_config = ConfigDict(extra="forbid", title="MetaTune study file")

    dataset: str = Field(
        min_length=1, description="the training data: a path relative to this file"
    )
    name: str | None = Field(
        None, min_length=1, max_length=120, description="what to call the study"
    )
    task: TaskType | None = Field(None, description="what the adapter learns")
    base_model: str | None = Field(
        None, description="embedded alias, local Hugging Face model folder or Hub id"
    )
    deadline: str | None = Field(
        None, description="24h / 90m / 3d from submission, or an ISO 8601 time with a zone"
    )
    trials: int | None = Field(None, ge=1, le=50, description="configurations to train")
    gpus_per_trial: int | None = Field(None, ge=1, le=64, description="GPUs each trial trains on")
    webhook: str | None = Field(None, description="URL notified of the study's progress")
    region_group: RegionGroup | None = Field(None, description="data residency")
    home_datacenter: str | None = Field(None, description="your datacenter (the run-now baseline)")
    carbon_preference: CarbonPreference | None = Field(
        None, description="greenest | balanced | fastest"
    )
    text_column: str | None = Field(None, description="column with the text (default: detected)")
    text_pair_column: str | None = Field(None, description="second text of a pair task")
    label_column: str | None = Field(None, description="column with the label (default: detected)")

    def dataset_path(self, study_file: Path) -> Path:
        """The dataset, resolved against the study file's folder."""
        return (study_file.parent / self.dataset).expanduser()


def is_study_file(path: Path) -> bool:
    return path.suffix.lower() in SUFFIXES


def read_study_file(path: Path) -> StudyFile:
    """The study file at ``path``, validated; :class:`StudyFileError` (one line) otherwise."""
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StudyFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise StudyFileError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise StudyFileError(f"{path}: expected a mapping of settings (name: ..., dataset: ...)")
    try:
        return StudyFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(file)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise StudyFileError(f"{path}: {field}: {message}{more}") from None


def study_file_schema() -> str:
    """The published JSON Schema of a study file (``docs/study.schema.json``), as text."""
    schema = StudyFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
