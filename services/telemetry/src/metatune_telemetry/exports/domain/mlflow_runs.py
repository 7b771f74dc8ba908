"""What a study's finished trials become in MLflow (pure: no MLflow, no database).

One experiment per study, named after it (its name and id); one run per trial whose run
finished (completed, early-stopped included, or failed), named by its trial number and job. A
run carries the trial's LoRA configuration, base model, dataset, datacenter(s) and trial index
as parameters; its training curve as per-step metrics; its held-out metrics, energy (kWh) and
emissions (g CO2e) as final metrics; and tags naming the study, the job, how the trial ended
and the MetaTune version. The exporter (``adapters/mlflow_export.py``) finds a trial's run
again by the job-id tag, so exporting twice adds nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from metatune.display import trial_label, trial_outcome
from metatune.errors import MetaTuneError

TAG_STUDY = "metatune.study_id"
TAG_STUDY_NAME = "metatune.study_name"
TAG_JOB = "metatune.job_id"
TAG_STATUS = "metatune.status"
TAG_EARLY_STOPPED = "metatune.early_stopped"
TAG_VERSION = "metatune.version"
TAG_ADAPTER = "metatune.adapter_key"
# "complete" once every part of a run (or every run of an experiment) is logged: a run an
# interrupted export left without it is made again, an experiment with it is not read again
TAG_EXPORT = "metatune.export"
EXPORT_COMPLETE = "complete"
ADAPTER_ARTIFACTS = "adapter"  # the folder of the run's artifacts the adapter's files go in
# the training curve, as ``run_metrics`` stores it per step
CURVE_METRICS = ("train_loss", "val_loss", "learning_rate")
ENERGY_METRIC = "energy_kwh"
EMISSIONS_METRIC = "emissions_g_co2e"
# MLflow's run statuses, by how the run ended
MLFLOW_STATUS = {"completed": "FINISHED", "failed": "FAILED"}


@dataclass(frozen=True)
class StepPoint:
    """One optimizer step of a run's training curve, as stored."""

    step: int
    at: datetime
    values: Mapping[str, float | None]  # CURVE_METRICS that the step reported


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a study whose run finished, as telemetry stored it."""

    job_id: UUID
    trial_index: int | None
    status: str  # completed | failed
    finished_at: datetime
    base_model: str | None
    dataset: str | None
    datacenters: Sequence[str]
    config: Mapping[str, Any] | None
    metrics: Mapping[str, Any] | None
    energy_wh: float
    emissions_g: float
    early_stopped: bool = False
    stop_reason: str | None = None
    steps: int | None = None
    adapter_key: str | None = None
    points: Sequence[StepPoint] = field(default_factory=tuple)


@dataclass(frozen=True)
class StudyRecord:
    study_id: UUID
    name: str | None
    trials: Sequence[TrialRecord]  # trials whose run finished, in trial order


@dataclass(frozen=True)
class MetricValue:
    key: str
    value: float
    timestamp_ms: int
    step: int


def experiment_name(study_id: UUID, name: str | None) -> str:
    """The study's experiment: its name and id (names need not be unique, ids are)."""
    return f"{name} ({study_id})" if name else f"study {study_id}"


def experiment_tags(study: StudyRecord) -> dict[str, str]:
    tags = {TAG_STUDY: str(study.study_id)}
    if study.name:
        tags[TAG_STUDY_NAME] = study.name
    return tags


class ArtifactLocationNeeded(MetaTuneError, ValueError):
    """A tracking store with no folder beside it and no ``--artifact-location``: MLflow would put
    the artifacts in ``./mlruns`` of whatever folder the export runs in."""


def artifact_location(
    tracking_uri: str, study_id: UUID, given: str | None, cwd: str = "/"
) -> str | None:
    """Where a new experiment keeps its runs' artifacts (None: where the store decides).

    ``given`` (``--artifact-location``) as it is; for a SQLite store, ``mlartifacts/<study>`` in
    the database file's folder (as ``mlflow server`` keeps ``./mlartifacts`` beside its store); a
    server (``http(s)://``, ``databricks``) and a file store decide themselves; any other database
    needs ``given``. ``cwd``: the folder a relative SQLite path is in (MLflow's reading of it)."""
    if given:
        return given
    scheme = urlsplit(tracking_uri).scheme.lower()
    if scheme in ("http", "https", "databricks", "file", ""):
        return None
    if scheme == "sqlite":
        path = tracking_uri.split(":///", 1)[1] if ":///" in tracking_uri else ""
        if path and path != ":memory:":
            folder = (PurePosixPath(cwd) / path.split("?", 1)[0]).parent
            return (folder / "mlartifacts" / str(study_id)).as_uri()
    raise ArtifactLocationNeeded(
        f"a {scheme} tracking store has no folder to keep the artifacts beside it: give "
        "--artifact-location (METATUNE_MLFLOW_ARTIFACT_LOCATION), a folder or an object store URI"
    )


def run_name(trial: TrialRecord) -> str:
    """``trial #1 (1a2b3c4d)``: the trial's number as every view shows it, and its job."""
    return f"trial {trial_label(trial.trial_index)} ({str(trial.job_id)[:8]})"


def millis(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _param(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def run_params(trial: TrialRecord) -> dict[str, str]:
    """The LoRA configuration (one parameter per field), base model, dataset, datacenter(s),
    trial index (0-based) and number (1-based, as the run's name); MLflow keeps parameters as
    text, so lists and None are written as JSON."""
    params = {str(k): _param(v) for k, v in sorted((trial.config or {}).items())}
    params |= {
        "base_model": _param(trial.base_model),
        "dataset": _param(trial.dataset),
        "datacenter": ",".join(trial.datacenters),
        "trial_index": _param(trial.trial_index),  # 0-based, as the contracts and --json
        # 1-based, as the run's name and every view show it: run "trial #2" has trial_number 2
        "trial_number": _param(None if trial.trial_index is None else trial.trial_index + 1),
    }
    return params


def status_label(trial: TrialRecord) -> str:
    """How the trial ended, in the words every view uses (``early-stopped (plateau, step 40)``)."""
    return trial_outcome(
        trial.status,
        early_stopped=trial.early_stopped,
        stop_reason=trial.stop_reason,
        steps=trial.steps,
    )


def run_tags(trial: TrialRecord, study: StudyRecord, version: str) -> dict[str, str]:
    """The run's tags at creation (the export is marked complete last, see ``TAG_EXPORT``)."""
    tags = {
        TAG_STUDY: str(study.study_id),
        TAG_JOB: str(trial.job_id),
        TAG_STATUS: status_label(trial),
        TAG_EARLY_STOPPED: str(trial.status == "completed" and trial.early_stopped).lower(),
        TAG_VERSION: version,
    }
    if trial.adapter_key:
        tags[TAG_ADAPTER] = trial.adapter_key
    return tags


def mlflow_status(trial: TrialRecord) -> str:
    return MLFLOW_STATUS.get(trial.status, "KILLED")


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def curve_metrics(trial: TrialRecord) -> list[MetricValue]:
    """Each step's training loss, validation loss and learning rate, where it reported one."""
    out = []
    for point in trial.points:
        for key in CURVE_METRICS:
            value = _finite(point.values.get(key))
            if value is not None:
                out.append(MetricValue(key, value, millis(point.at), point.step))
    return out


def final_step(trial: TrialRecord) -> int:
    """The step the final metrics are logged at: the run's last (so they are its latest values)."""
    last = max((p.step for p in trial.points), default=0)
    return max(last, trial.steps or 0)


def final_metrics(trial: TrialRecord) -> list[MetricValue]:
    """The held-out metrics the run ended with, its energy (kWh) and emissions (g CO2e)."""
    at, step = millis(trial.finished_at), final_step(trial)
    values = {str(k): _finite(v) for k, v in sorted((trial.metrics or {}).items())}
    values[ENERGY_METRIC] = trial.energy_wh / 1000
    values[EMISSIONS_METRIC] = trial.emissions_g
    return [MetricValue(k, v, at, step) for k, v in values.items() if v is not None]


def start_millis(trial: TrialRecord) -> int:
    """When the run started, as far as telemetry knows: its first step, else its end."""
    return min((millis(p.at) for p in trial.points), default=millis(trial.finished_at))
