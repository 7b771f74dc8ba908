"""What the client returns: typed views of the event log and receipts of what it published.

Their JSON (``model_dump(mode="json")``) is what the CLI's ``--json`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, PlainSerializer

from metatune.contracts import (
    DatasetLocation,
    LoraConfig,
    MetaFeatures,
    RunMetrics,
    StudySpec,
    StudyStopped,
)

# times as Python writes them (``+00:00``), as the CLI has always printed them
IsoTime = Annotated[datetime, PlainSerializer(lambda t: t.isoformat(), return_type=str)]


class View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Receipt(View):
    """A submission as published: the study's id, where its dataset is, the event's id, and whether
    the profiler checked the dataset first (``skipped``: it did not answer in time, so the dataset
    went unchecked; ``validation_note`` says why and where its problems will show)."""

    study_id: UUID
    dataset: DatasetLocation
    event_id: UUID
    validation: Literal["passed", "skipped"] = "passed"
    validation_note: str | None = None


class StudySummary(View):
    """One study as ``study list`` shows it."""

    study_id: UUID
    name: str | None
    tags: list[str]
    status: str
    submitted_at: IsoTime | None
    dataset: str | None
    task: str | None
    base_model: str | None
    trials_budget: int | None
    deadline: IsoTime | None
    trials_requested: int
    trials_completed: int
    trials_early_stopped: int
    trials_failed: int
    # the deadline as an outcome (metatune.deadlines): None while no trial has ended
    deadline_met: bool | None = None
    trials_late: int = 0  # trials whose run ended after the deadline
    late_by_s: float | None = None  # the latest one's lateness, seconds
    # in words: "met its deadline", "finished after its deadline (1 trial late, by 2 h 06 min)";
    # while trials run: "no trial late so far", "1 trial late, by 40 min, so far"
    deadline_outcome: str | None = None


class TrialSummary(View):
    """One trial: configuration, prediction, outcome, metrics, energy and emissions."""

    job_id: UUID
    trial_index: int | None
    status: str
    config: LoraConfig | None
    predicted_metric: float | None
    predicted_metric_std: float | None
    predicted_metric_interval: tuple[float, float] | None = None  # 80 %, as published
    metric_name: str | None
    datacenter: str | None
    metrics: RunMetrics | None
    majority_baseline: float | None
    chance_baseline: float | None  # 1 / the classes the profiler counted
    steps: int | None
    adapter_key: str | None
    energy_wh: float | None
    emissions_g: float | None
    error: str | None


class TrialResult(TrialSummary):
    """A trial with its emissions realised: each hour its grid has since observed re-priced at the
    observed intensity, the others at the forecast's (``forecast_priced_hours``)."""

    realised_emissions_g: float | None
    realised_hours: int | None
    forecast_priced_hours: int | None


class StudyDetail(StudySummary):
    """Everything ``study show`` tells: the submission, the profile, each trial, why it stopped."""

    spec: StudySpec | None
    profile: MetaFeatures | None
    rows_skipped: int | None
    trials: list[TrialSummary]
    stopped: StudyStopped | None


class Cancellation(View):
    """A JobCancelled as published (``event_id`` None: not published, the job had ended)."""

    event_id: UUID | None
    job_id: UUID
    reason: str
    check_skipped: str | None = None  # why the job could not be looked up in the log first
    state: str | None = None  # where the job stood, as the scheduler said (None: no answer)


class StudyCancellation(View):
    """A StudyCancelled as published (``event_id``), and the trials of the study that were
    cancelled with it (those that had not ended)."""

    event_id: UUID
    study_id: UUID
    reason: str
    cancelled: list[Cancellation]


class AdapterDownload(View):
    """An adapter written to ``out``: its object-store key, the files, the trainer's metadata."""

    job_id: UUID
    key: str
    out: Path
    files: list[str]
    metadata: dict[str, Any]
    card: str
    labels: list[str]


@dataclass(frozen=True)
class Progress:
    """Where a followed study stands: ``summary`` is None until the submission is in the log."""

    study_id: UUID
    summary: StudySummary | None
    finished: bool

    @property
    def status(self) -> str:
        return self.summary.status if self.summary else "submitted"

    @property
    def line(self) -> str:
        """One line: the study's state and its trials' outcomes so far."""
        s = self.summary
        if s is None:
            return f"{self.study_id}: submitted"
        parts = [
            f"{s.name or s.study_id}: {s.status}",
            f"{s.trials_completed}/{s.trials_budget or '?'} trials completed",
        ]
        if s.trials_early_stopped:
            parts.append(f"{s.trials_early_stopped} of them early-stopped")
        if s.trials_failed:
            parts.append(f"{s.trials_failed} failed")
        return ", ".join(parts)
