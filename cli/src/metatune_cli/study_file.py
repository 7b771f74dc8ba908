"""Study files: a study a team can review and commit, submitted with ``metatune submit study.yaml``.

A YAML (or JSON) mapping of the submission's settings, checked against :class:`StudyFile` (its
JSON Schema is published as ``docs/study.schema.json``; ``python -m metatune_cli.study_file`` writes
it) before anything is uploaded. ``dataset`` is a file path relative to the study file (uploaded)
or ``{object_key: KEY}``, a file already in the datasets object store (not uploaded again). Every
field but ``dataset`` may be left out (the command's defaults apply) and every other field may be
overridden by the command's flag of the same name (``trials`` by ``--trials``, ``tags`` by
``--tag``).

    name: snips-intents
    tags: [nlp, intents]
    dataset: snips_intents_2k.jsonl
    task: classification
    deadline: 3d
    budget: {epochs: 3, max_train_rows: 5000}
    carbon_preference: balanced

Not in a study file, because no service would honour it: the metric (each task has one
objective: accuracy for classification, negative perplexity for causal LM) and search-space
bounds (the recommender searches the knowledge base's LoRA space, :mod:`metatune.knowledge.space`).
Two budgets: ``trials`` (configurations to train) and ``budget`` (how long each trains: ``epochs``
or ``max_steps``, over at most ``max_train_rows`` rows; default 3 epochs over 1,000 rows); the
flags ``--epochs``, ``--max-steps`` and ``--max-train-rows`` override its fields.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    HttpUrl,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from metatune.contracts import CarbonPreference, RegionGroup, StudyTag, TaskType, TrainingBudget
from metatune.errors import MetaTuneError

SUFFIXES = (".yaml", ".yml")
JSON_SUFFIX = ".json"
_FIRST_LINE_LIMIT = 1 << 20  # a JSON-lines dataset's first row; a study file's line is far shorter
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhd])\s*$")
TOO_DEEP = "nested too deeply to be a study file (a mapping of settings)"


class StudyFileError(MetaTuneError, ValueError):
    """A study file that cannot be read or does not validate; the message is one line naming the
    file and the field."""


def parse_deadline(text: str, now: datetime) -> datetime:
    """``24h``, ``90m``, ``3d`` from ``now``, or an ISO 8601 time with a zone (in UTC);
    :class:`ValueError` saying what is accepted otherwise (one past the calendar's end too)."""
    match = _RELATIVE.match(text)
    if match:
        value, unit = float(match.group(1)), match.group(2)
        try:
            return now + timedelta(**{{"m": "minutes", "h": "hours", "d": "days"}[unit]: value})
        except OverflowError:
            raise ValueError(f"{text!r} is too far ahead (past the year 9999)") from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r}: use 24h / 90m / 3d or an ISO time with a zone") from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (add Z or +01:00)")
    return moment.astimezone(UTC)


def future_deadline(text: str, now: datetime) -> datetime:
    """:func:`parse_deadline`, refusing (:class:`ValueError`) a deadline that is not after ``now``
    (the platform's clock): no trial could meet it."""
    moment = parse_deadline(text, now)
    if moment <= now:
        raise ValueError(
            f"deadline {text!r} is not in the future ({moment:%Y-%m-%d %H:%M} UTC; the "
            f"platform's clock reads {now.astimezone(UTC):%Y-%m-%d %H:%M} UTC)"
        )
    return moment


class StoredDataset(BaseModel):
    """A dataset already in the datasets object store, by its key."""

    model_config = ConfigDict(extra="forbid")

    object_key: str = Field(
        min_length=1,
        description="key in the datasets bucket (as a previous submission's receipt shows)",
    )


def _dataset_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "path"
    if isinstance(value, dict | StoredDataset):
        return "object"
    return None


Dataset = Annotated[
    Annotated[str, Field(min_length=1), Tag("path")] | Annotated[StoredDataset, Tag("object")],
    Discriminator(
        _dataset_kind,
        custom_error_type="dataset",
        custom_error_message="a file path or {object_key: KEY}",
    ),
]


class StudyFile(BaseModel):
    """What a study file may hold: the options of ``metatune submit``, by the same names."""

    model_config = ConfigDict(extra="forbid", title="MetaTune study file")

    name: str | None = Field(
        None,
        min_length=1,
        max_length=80,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="what to call the study (default: the dataset file's name, no suffix)",
    )
    tags: list[StudyTag] | None = Field(
        None,
        max_length=20,
        description="labels to file the study under (`metatune study list --tag`); --tag "
        "replaces them",
    )
    dataset: Dataset = Field(
        description="the training data: a CSV, JSON-lines, Parquet or text file, by a path "
        "relative to this file (uploaded), or {object_key: KEY} for a file already in the "
        "datasets object store"
    )
    task: TaskType | None = Field(None, description="what the adapter learns")
    base_model: str | None = Field(
        None, min_length=1, description="embedded alias, local Hugging Face model folder or Hub id"
    )
    deadline: str | None = Field(
        None,
        description="24h / 90m / 3d from submission, or an ISO 8601 time with a zone",
        examples=["3d", "2026-12-01T18:00:00Z"],
    )
    trials: int | None = Field(None, ge=1, le=50, description="configurations to train")
    budget: TrainingBudget | None = Field(
        None,
        description="how long each trial trains: epochs or max_steps, over at most "
        "max_train_rows rows (default: 3 epochs over 1,000 rows)",
    )
    gpus_per_trial: int | None = Field(None, ge=1, le=64, description="GPUs each trial trains on")
    webhook: HttpUrl | None = Field(None, description="URL notified of the study's progress")
    region_group: RegionGroup | None = Field(None, description="data residency")
    home_datacenter: str | None = Field(
        None, min_length=1, description="your datacenter (the run-now baseline)"
    )
    carbon_preference: CarbonPreference | None = Field(
        None, description="greenest | balanced | fastest"
    )
    text_column: str | None = Field(None, description="column with the text (default: detected)")
    text_pair_column: str | None = Field(None, description="second text of a pair task")
    label_column: str | None = Field(None, description="column with the label (default: detected)")

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline_as_text(cls, value: Any) -> Any:
        """An unquoted YAML time is already a datetime; read back, it is the text that was meant."""
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"{value.isoformat()} has no time zone (add Z or +01:00)")
            return value.isoformat()
        if isinstance(value, date):
            raise ValueError(f"{value.isoformat()} is a date: give a time with a zone")
        return value

    @field_validator("deadline")
    @classmethod
    def _deadline_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_deadline(value, datetime.now(UTC))
        return value

    @field_validator("label_column")
    @classmethod
    def _lm_has_no_label(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("task") == TaskType.causal_lm:
            raise ValueError("a causal_lm study has no label column")
        return value

    def dataset_path(self, study_file: Path, *, anywhere: bool = False) -> Path | None:
        """The dataset file, resolved against the study file's folder; None for a stored one.
        Unless ``anywhere`` (the user's explicit choice, never the file's), it must lie in that
        folder or below it, links resolved: a study file from someone else cannot make
        ``submit`` upload ``../../../../etc/passwd`` (:class:`StudyFileError` otherwise)."""
        if not isinstance(self.dataset, str):
            return None
        path = study_file.parent / Path(self.dataset).expanduser()
        folder = study_file.resolve().parent
        if not anywhere and not path.resolve().is_relative_to(folder):
            raise StudyFileError(
                f"{study_file}: dataset: {self.dataset} is outside the study file's folder "
                f"{folder}; submit with --allow-dataset-outside (the client: "
                "allow_dataset_outside=True) to read it"
            )
        return path

    def object_key(self) -> str | None:
        """The key of a dataset already in the object store; None for a file."""
        return self.dataset.object_key if isinstance(self.dataset, StoredDataset) else None


def is_study_file(path: Path) -> bool:
    """A ``.yaml`` / ``.yml`` file, or a ``.json`` file that is not JSON lines: one JSON object
    (possibly over several lines), where a JSON-lines dataset has one object on each of at least
    two lines."""
    suffix = path.suffix.lower()
    if suffix in SUFFIXES:
        return True
    if suffix != JSON_SUFFIX:
        return False
    try:
        with path.open("rb") as fh:
            first = fh.readline(_FIRST_LINE_LIMIT)
            while first and not first.strip():
                first = fh.readline(_FIRST_LINE_LIMIT)
            more = any(line.strip() for line in iter(lambda: fh.readline(_FIRST_LINE_LIMIT), b""))
    except OSError:
        return False
    if not more:
        return True  # one line at most: a study file, never a trainable dataset
    try:
        return not isinstance(json.loads(first), dict)
    except (ValueError, RecursionError):
        return True  # a first line that is no JSON object: a study spread over lines


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice (PyYAML keeps the last silently, so a
    reviewer reading the first would be misled)."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | bool):
            continue  # construct_mapping refuses what cannot be a key
        if key in seen:
            raise StudyFileError(f"{key}: given twice (line {key_node.start_mark.line + 1})")
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)


def _load(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == JSON_SUFFIX:
        try:
            return json.loads(text, object_pairs_hook=_json_object)
        except json.JSONDecodeError as exc:
            raise StudyFileError(f"not valid JSON at line {exc.lineno}: {exc.msg}") from None
        except RecursionError:
            raise StudyFileError(TOO_DEEP) from None
    try:
        return yaml.load(
            text, Loader=_UniqueKeyLoader
        )  # a SafeLoader subclass: no arbitrary objects
    except RecursionError:
        raise StudyFileError(TOO_DEEP) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise StudyFileError(f"not valid YAML{where}: {problem}") from None


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StudyFileError(f"{key}: given twice")
        result[key] = value
    return result


def _field(loc: tuple[int | str, ...]) -> str:
    """The field a pydantic error is about, as the file spells it (the union's branch left out)."""
    if len(loc) > 1 and loc[0] == "dataset" and loc[1] in ("path", "object"):
        loc = (loc[0], *loc[2:])
    return ".".join(str(p) for p in loc) or "(file)"


def read_study_file(path: Path) -> StudyFile:
    """The study file at ``path``, validated; :class:`StudyFileError` (one line starting with the
    path, then the field) otherwise."""
    try:
        data = _load(path)
    except OSError as exc:
        raise StudyFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise StudyFileError(f"{path}: not UTF-8 text") from None
    except StudyFileError as exc:
        raise StudyFileError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise StudyFileError(f"{path}: expected a mapping of settings (name: ..., dataset: ...)")
    try:
        return StudyFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        message = message.removeprefix("Value error, ")
        raise StudyFileError(f"{path}: {_field(first['loc'])}: {message}{more}") from None


def study_file_schema() -> str:
    """The published JSON Schema of a study file (``docs/study.schema.json``), as text."""
    schema = StudyFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m metatune_cli.study_file > docs/study.schema.json
    sys.stdout.write(study_file_schema())
