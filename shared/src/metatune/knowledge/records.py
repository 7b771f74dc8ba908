"""What the knowledge base holds: one :class:`KbRun` per fine-tuning run, and the data-file format.

A knowledge-base file (``*.jsonl`` or ``*.jsonl.gz``) is one :class:`KbFileHeader` line, then one
:class:`KbRun` per line. It carries meta-features and results, never a dataset's texts, so it can
ship with the product whatever the licence of the texts it was measured on.

Runs come from three places (``Provenance.source``): ``seed-kb`` (``metatune kb build``, the
project's own training on public text datasets), ``platform`` (the flywheel: every run the
platform completes) and ``public:<table>`` (imported public HPO tables, whose "configuration" is
that table's own search space, not always LoRA).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import AwareDatetime, Field, model_validator

from metatune.contracts import Contract, CurvePoint, Hardware, MetaFeatures, StudySpec, TaskType

# CurvePoint and Hardware are contracts (``RunCompleted`` carries them); re-exported here.
__all__ = [
    "KB_SCHEMA_VERSION",
    "CurvePoint",
    "DatasetInfo",
    "Hardware",
    "KbFileHeader",
    "KbRun",
    "Provenance",
    "RunBudget",
    "RunStatus",
    "StudyBest",
    "StudyProfile",
    "under_licences",
]

KB_SCHEMA_VERSION = 1


class RunStatus(StrEnum):
    completed = "completed"
    early_stopped = "early_stopped"  # stopped by the plateau rule or the learning-curve predictor
    failed = "failed"


class Provenance(Contract):
    source: str = Field(description="seed-kb | platform | public:<table>")
    code_version: str | None = None
    machine: str | None = None
    created_at: AwareDatetime | None = None
    note: str | None = None


class DatasetInfo(Contract):
    """The dataset a run trained on. ``features`` are the profiler's meta-features of the data the run
    saw; ``descriptors`` stand in for them where the texts are absent (public tables: train size,
    language pair, domain...)."""

    name: str = Field(min_length=1)
    features: MetaFeatures | None = None
    descriptors: dict[str, float | str] = Field(default_factory=dict)
    licence: str | None = None
    n_train: int | None = Field(None, ge=0)
    n_val: int | None = Field(None, ge=0)


class RunBudget(Contract):
    """How long a run trained, in the units users set a budget in: passes over its training rows,
    optimizer steps and examples seen. Derived from the run's configuration, steps and rows where a
    file predates the field, so every row of every seed has one."""

    epochs: float | None = Field(
        None, ge=0, description="passes over the training rows (examples seen / train rows)"
    )
    steps: int = Field(0, ge=0, description="optimizer steps trained")
    examples_seen: int = Field(0, ge=0, description="steps x batch size x accumulation")
    train_rows: int | None = Field(None, ge=0, description="rows of the training split")

    @classmethod
    def of(cls, config: dict[str, Any], steps: int, train_rows: int | None) -> RunBudget | None:
        """The budget of a LoRA run (a configuration with a batch size); None for other tables."""
        batch = config.get("batch_size")
        if not isinstance(batch, int):
            return None
        accum = config.get("grad_accum_steps")
        examples = steps * batch * (accum if isinstance(accum, int) else 1)
        epochs = round(examples / train_rows, 4) if train_rows else config.get("epochs")
        return cls(epochs=epochs, steps=steps, examples_seen=examples, train_rows=train_rows)


class KbRun(Contract):
    """One fine-tuning run, whole: dataset, model, configuration, curve, outcome and cost."""

    run_id: str = Field(
        min_length=1,
        description="the job id for platform runs; a stable id for built / imported runs",
    )
    study_id: UUID | None = None
    dataset: DatasetInfo
    base_model: str
    task: TaskType | str = Field(description="a MetaTune task, or the public table's own task name")
    config: dict[str, Any] = Field(
        description="the full configuration (a LoraConfig for LoRA runs)"
    )
    status: RunStatus = RunStatus.completed
    stop_reason: str | None = None
    metric_name: str = Field(description="accuracy, macro_f1, perplexity, bleu...")
    metric: float | None = Field(
        None, description="final objective, higher is better (negated where lower is)"
    )
    val_loss: float | None = None
    majority_baseline: float | None = Field(
        None, description="accuracy of always predicting the majority class"
    )
    curve: list[CurvePoint] = Field(default_factory=list)
    steps: int = Field(0, ge=0)
    planned_steps: int | None = Field(None, ge=0)
    tokens: int = Field(0, ge=0, description="useful tokens seen")
    tokens_with_padding: int = Field(0, ge=0)
    wall_seconds: float = Field(0.0, ge=0)
    train_seconds: float | None = Field(None, ge=0, description="seconds inside optimizer steps")
    gpu_hours: float = Field(0.0, ge=0)
    energy_wh: float = Field(0.0, ge=0)
    emissions_g: float | None = Field(None, ge=0, description="None: no carbon intensity priced it")
    hardware: Hardware | None = None
    datacenter: str | None = None
    seed: int | None = None
    provenance: Provenance
    profile_missing: bool = Field(False, description="stored before its study's profile arrived")
    budget: RunBudget | None = Field(
        None, description="epochs, steps and examples seen; derived when a file lacks it"
    )

    @model_validator(mode="before")
    @classmethod
    def _budget_of_the_run(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("budget") is not None:
            return data
        config, dataset = data.get("config"), data.get("dataset")
        if not isinstance(config, dict):
            return data
        rows = (
            dataset.get("n_train")
            if isinstance(dataset, dict)
            else getattr(dataset, "n_train", None)
        )
        budget = RunBudget.of(config, int(data.get("steps") or 0), rows)
        return {**data, "budget": budget} if budget is not None else data


class KbFileHeader(Contract):
    """First line of a knowledge-base file."""

    kind: str = "metatune-knowledge-base"
    schema_version: int = KB_SCHEMA_VERSION
    provenance: dict[str, Any] = Field(
        default_factory=dict, description="machine, versions, budgets, datasets"
    )


class StudyBest(Contract):
    """A study's best finished trial so far (KV ``metatune_studies``, key = study id), written by the
    recommender as completions arrive, read by agents to stop a trial that cannot beat it."""

    study_id: UUID
    metric_name: str
    best: float = Field(description="higher is better")
    job_id: UUID | None = None
    completed: int = Field(0, ge=0, description="finished trials of the study")


class StudyProfile(Contract):
    """What the profiler said about a platform study's dataset (the flywheel joins runs to it)."""

    study_id: UUID
    dataset_name: str
    spec: StudySpec
    features: MetaFeatures
    profiled_at: datetime | None = None


def under_licences(runs: Iterable[KbRun], licences: Sequence[str]) -> list[KbRun]:
    """The runs whose dataset's recorded licence contains one of ``licences`` (case-insensitive:
    ``CC BY`` keeps CC BY 4.0 and CC BY-SA 3.0); a run with no licence recorded is kept by none."""
    wanted = [licence.casefold() for licence in licences]
    return [
        run
        for run in runs
        if run.dataset.licence and any(w in run.dataset.licence.casefold() for w in wanted)
    ]
