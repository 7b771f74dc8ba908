"""What the event log says about each study and its trials: a pure fold, no I/O.

A study is its submission, its profile, the trials the recommender requested (with predictions),
what became of each (completed, failed, cancelled, infeasible) and whether it was stopped. A
completion or failure counts only from the datacenter its job is assigned to at that point of the
log, as for every service (:mod:`metatune.provenance`): a forgery an agent publishes under its own
subject, or a stale report from where the job ran before it moved, is left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from metatune.contracts import (
    DatasetProfiled,
    DatasetSubmitted,
    Event,
    JobCancelled,
    JobInfeasible,
    JobRequested,
    RunCompleted,
    RunFailed,
    StudyStopped,
)
from metatune.deadlines import DeadlineOutcome, deadline_outcome
from metatune.display import EARLY_STOPPED, chance_baseline, study_state, trial_outcome
from metatune.provenance import AssignmentLog

from .models import StudyDetail, StudySummary, TrialSummary


@dataclass
class Trial:
    job_id: UUID
    requested: JobRequested | None = None
    completed: RunCompleted | None = None
    failed: RunFailed | None = None
    cancelled: JobCancelled | None = None
    infeasible: JobInfeasible | None = None

    @property
    def status(self) -> str:
        if self.completed:
            done = self.completed
            return trial_outcome(
                "completed",
                early_stopped=done.early_stopped,
                stop_reason=done.stop_reason,
                steps=done.steps,
            )
        if self.failed:
            return f"failed: {self.failed.reason.value}"
        if self.cancelled:
            return "cancelled"
        if self.infeasible:
            return "infeasible"
        return "requested"

    def summary(self, chance: float | None = None) -> TrialSummary:
        """The trial: configuration, prediction, outcome, metrics (with its study's ``chance``
        baseline), energy and emissions."""
        r, done, failed = self.requested, self.completed, self.failed
        accounting = done.accounting if done else failed.accounting if failed else None
        return TrialSummary(
            job_id=self.job_id,
            trial_index=r.trial_index if r else None,
            status=self.status,
            config=done.config if done else r.config if r else failed.config if failed else None,
            predicted_metric=r.predicted_metric if r else None,
            predicted_metric_std=r.predicted_metric_std if r else None,
            predicted_metric_interval=r.predicted_metric_interval if r else None,
            metric_name=r.metric_name if r else None,
            datacenter=end.datacenter if (end := done or failed) else None,
            metrics=done.metrics if done else None,
            majority_baseline=done.majority_baseline if done else None,
            chance_baseline=chance,
            steps=done.steps if done else None,
            adapter_key=done.adapter_key if done else None,
            energy_wh=accounting.energy_wh if accounting else None,
            emissions_g=accounting.emissions_g if accounting else None,
            error=self.error,
        )

    @property
    def error(self) -> str | None:
        """Why the trial failed, was cancelled or could not run."""
        if self.failed:
            return self.failed.message
        if self.cancelled:
            return self.cancelled.reason
        return self.infeasible.reason if self.infeasible else None


@dataclass
class Study:
    study_id: UUID
    submitted: DatasetSubmitted | None = None
    profiled: DatasetProfiled | None = None
    trials: dict[UUID, Trial] = field(default_factory=dict)
    stopped: StudyStopped | None = None

    @property
    def status(self) -> str:
        unfinished = sum(t.status == "requested" for t in self.trials.values())
        deadline = self.deadline()
        if self.stopped:
            return study_state(self.stopped.reason.value, unfinished, deadline)
        if self.trials:
            return study_state(None, unfinished, deadline)
        return "profiled" if self.profiled else "submitted"

    def deadline(self) -> DeadlineOutcome | None:
        """How its ended trials stand against its deadline (None: no deadline known, or no trial
        ended yet)."""
        dataset = self.submitted or self.profiled
        ends = [end.occurred_at for t in self.trials.values() if (end := t.completed or t.failed)]
        if dataset is None or not ends:
            return None
        return deadline_outcome(dataset.spec.deadline, ends)

    @property
    def finished(self) -> bool:
        """The recommender requests no more trials and every trial it requested has ended."""
        return self.stopped is not None and all(
            t.status != "requested" for t in self.trials.values()
        )

    @property
    def chance_baseline(self) -> float | None:
        """1 / the classes its profile counted (None: not profiled yet, or a causal LM)."""
        return chance_baseline(self.profiled.features.n_classes) if self.profiled else None

    def count(self, *statuses: str) -> int:
        return sum(1 for t in self.trials.values() if t.status.startswith(statuses))

    def ordered_trials(self) -> list[Trial]:
        return sorted(
            self.trials.values(),
            key=lambda t: (t.requested.trial_index if t.requested else 1 << 30, str(t.job_id)),
        )

    def summary(self) -> StudySummary:
        return StudySummary(**self._summary_fields())

    def _summary_fields(self) -> dict[str, Any]:
        dataset = self.submitted or self.profiled
        spec = dataset.spec if dataset else None
        deadline = self.deadline()
        return {
            "study_id": self.study_id,
            "name": spec.name if spec else None,
            "tags": list(spec.tags) if spec else [],
            "status": self.status,
            "submitted_at": self.submitted.occurred_at if self.submitted else None,
            "dataset": spec.dataset.ref if spec else None,
            "task": spec.task.value if spec else None,
            "base_model": spec.base_model if spec else None,
            "trials_budget": spec.trials if spec else None,
            "deadline": spec.deadline if spec else None,
            "trials_requested": len(self.trials),
            "trials_completed": self.count("completed", EARLY_STOPPED),
            "trials_early_stopped": self.count(EARLY_STOPPED),
            "trials_failed": self.count("failed"),
            "deadline_met": None if deadline is None else deadline.met,
            "trials_late": 0 if deadline is None else deadline.late,
            "late_by_s": None if deadline is None else deadline.late_by_s,
            "deadline_outcome": None if deadline is None else self._deadline_words(deadline),
        }

    def _deadline_words(self, deadline: DeadlineOutcome) -> str:
        if self.finished:
            return deadline.words()
        return f"{deadline.lateness()}, so far" if deadline.late else "no trial late so far"

    def details(self) -> StudyDetail:
        """Everything ``study show`` tells."""
        return StudyDetail(
            **self._summary_fields(),
            spec=self.submitted.spec if self.submitted else None,
            profile=self.profiled.features if self.profiled else None,
            rows_skipped=self.profiled.rows_skipped if self.profiled else None,
            trials=[t.summary(self.chance_baseline) for t in self.ordered_trials()],
            stopped=self.stopped,
        )


def fold(log: Iterable[tuple[str, Event]]) -> dict[UUID, Study]:
    """Studies by id, in the order they were first seen, from ``log``'s (subject, event) pairs
    in stream order."""
    studies: dict[UUID, Study] = {}
    provenance = AssignmentLog()
    job_study: dict[UUID, UUID] = {}

    def study(study_id: UUID) -> Study:
        return studies.setdefault(study_id, Study(study_id))

    def trial(job_id: UUID, study_id: UUID | None) -> Trial | None:
        study_id = study_id or job_study.get(job_id)
        if study_id is None:
            return None  # a job that is not part of a study in this log
        job_study[job_id] = study_id
        return study(study_id).trials.setdefault(job_id, Trial(job_id))

    for subject, event in log:
        if provenance.judge(subject, event) is not None:
            continue  # not from where its job is assigned
        match event:
            case DatasetSubmitted():
                study(event.study_id).submitted = event
            case DatasetProfiled():
                study(event.study_id).profiled = event
            case StudyStopped():
                study(event.study_id).stopped = event
            case JobRequested():
                if (t := trial(event.job_id, event.study_id)) is not None:
                    t.requested = event
            case RunCompleted():
                if (t := trial(event.job_id, event.study_id)) is not None:
                    t.completed = event
            case RunFailed():
                if (t := trial(event.job_id, event.study_id)) is not None:
                    t.failed = event
            case JobCancelled():
                if (t := trial(event.job_id, event.study_id)) is not None:
                    t.cancelled = event
            case JobInfeasible():
                if (t := trial(event.job_id, event.study_id)) is not None:
                    t.infeasible = event
    return studies
