"""What the demo shows, folded from the bus: each event updates one :class:`DemoState`.

The demo never asks a service how things went; it reads the same events every other consumer
reads (the profile, the trials with their predictions, the plans, the assignments, the runs), so
what it prints is what happened on the bus; a run event counts only from the datacenter its job is
assigned to (:mod:`metatune.provenance`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from metatune.catalog import contract_for
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    DatasetProfiled,
    ErrorEvent,
    Event,
    JobInfeasible,
    JobRequested,
    Plan,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunProgress,
    StudyStopped,
)
from metatune.deadlines import DeadlineOutcome, deadline_outcome
from metatune.display import EARLY_STOPPED, study_state, trial_label, trial_outcome
from metatune.provenance import AssignmentLog

_SHOWN: frozenset[type[Event]] = frozenset(
    {
        DatasetProfiled,
        JobRequested,
        JobInfeasible,
        Plan,
        StudyStopped,
        Assignment,
        RunProgress,
        RunCompleted,
        RunFailed,
        RunPaused,
        ErrorEvent,
    }
)


def contract_of(subject: str) -> type[Event] | None:
    """The contract of a subject the demo follows (None: one it does not show)."""
    model = contract_for(subject)
    return model if model in _SHOWN else None


@dataclass
class JobView:
    job_id: UUID
    study_id: UUID
    trial_index: int
    request: JobRequested
    status: str = "requested"  # requested | running | paused | completed | early-stopped | failed
    datacenter: str | None = None  # where it runs or last ran
    visited: list[str] = field(default_factory=list)  # datacenters it trained at, in order
    planned: list[tuple[str, list[datetime]]] = field(default_factory=list)  # latest plan
    step: int = 0
    total_steps: int | None = None
    pauses: int = 0  # pause assignments while it was unfinished
    migrations: int = 0  # resumed at another datacenter than the one it last trained at
    metric: float | None = None
    energy_wh: float = 0.0
    emissions_g: float = 0.0
    stop_reason: str | None = None
    failure: str | None = None
    # the plan's price of it where it first placed it: its estimated energy at the forecast
    expected_g: float | None = None
    first_planned: list[str] = field(default_factory=list)  # the datacenters of that placement
    ended_at: datetime | None = None  # when its run completed or failed

    @property
    def finished(self) -> bool:
        return self.status in ("completed", EARLY_STOPPED, "failed")

    @property
    def estimated_wh(self) -> float:
        """IT energy its request estimated (the recommender's cost model): GPU-hours x power per
        GPU, the energy the plan prices before the trial has run."""
        r = self.request
        return r.estimated_gpu_hours * r.power_kw / r.gpus * 1000.0

    @property
    def moved(self) -> bool:
        """It trained somewhere its first placement did not put it (a re-plan, an outage)."""
        return any(dc not in self.first_planned for dc in self.visited)


@dataclass(frozen=True)
class FirstPlan:
    """The first plan version that placed trials of every study and every trial requested so
    far: the plan's figures before the trials trained, on the meter's basis (energy x PUE x
    forecast intensity)."""

    version: int
    expected_g: float
    baseline_g: float
    estimated_wh: float  # the energy of its trials as their requests estimated it
    trials: int


@dataclass
class StudyView:
    study_id: UUID
    name: str
    profile: DatasetProfiled | None = None
    jobs: list[UUID] = field(default_factory=list)
    stopped: StudyStopped | None = None
    finished: bool = False  # stopped, and every trial it requested has ended (said once)


@dataclass
class DemoState:
    studies: dict[UUID, StudyView]
    jobs: dict[UUID, JobView] = field(default_factory=dict)
    plan_version: int | None = None
    plan_expected_g: float | None = None
    plan_baseline_g: float | None = None
    first_plan: FirstPlan | None = None
    infeasible: int = 0
    errors: list[ErrorEvent] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    now: datetime | None = None  # simulated time of the latest event
    provenance: AssignmentLog = field(default_factory=AssignmentLog)

    # ----------------------------------------------------------------- folding
    def apply(self, subject: str, event: Event) -> None:
        if self.provenance.judge(subject, event) is not None:
            return  # not from where its job is assigned
        self.now = max(self.now, event.occurred_at) if self.now else event.occurred_at
        handler = getattr(self, f"_on_{type(event).__name__}", None)
        if handler is not None:
            handler(event)

    def _note(self, event: Event, text: str) -> None:
        self.log.append(f"{event.occurred_at:%d %H:%M} {text}")
        del self.log[:-200]

    def remark(self, text: str) -> None:
        """A line of the demo's own (a what-if it caused), at the latest simulated time seen."""
        stamp = f"{self.now:%d %H:%M}" if self.now else "--"
        self.log.append(f"{stamp} {text}")

    def job_name(self, job_id: UUID) -> str:
        return self._job_name(job_id)

    def _job_name(self, job_id: UUID) -> str:
        job = self.jobs.get(job_id)
        if job is None:
            return str(job_id)[:8]
        return f"{self.studies[job.study_id].name}{trial_label(job.trial_index)}"

    def _on_DatasetProfiled(self, event: DatasetProfiled) -> None:
        study = self.studies.get(event.study_id)
        if study is not None:
            study.profile = event
            self._note(event, f"profiled {study.name}: {event.features.n_examples} rows")

    def _on_JobRequested(self, event: JobRequested) -> None:
        study = self.studies.get(event.study_id)
        if study is None or event.job_id in self.jobs:
            return
        self.jobs[event.job_id] = JobView(event.job_id, event.study_id, event.trial_index, event)
        study.jobs.append(event.job_id)
        how = event.acquisition or "?"
        self._note(event, f"trial {self._job_name(event.job_id)} requested ({how})")

    def _on_Plan(self, event: Plan) -> None:
        if self.plan_version is not None and event.plan_version < self.plan_version:
            return
        if not event.changes_only:
            for job in self.jobs.values():
                job.planned = []
        changed = {entry.job_id for entry in event.entries}
        for job_id in changed | set(event.removed_jobs):
            if job_id in self.jobs:
                self.jobs[job_id].planned = []
        placed: dict[UUID, float] = {}
        for entry in event.entries:
            if entry.job_id in self.jobs:
                job = self.jobs[entry.job_id]
                job.planned.append((entry.datacenter, list(entry.hours)))
                if job.expected_g is None:  # its first placement (one version's entries)
                    placed[entry.job_id] = placed.get(entry.job_id, 0.0) + entry.emissions_g
                    job.first_planned.append(entry.datacenter)
        for job_id, grams in placed.items():
            self.jobs[job_id].expected_g = grams
        self.plan_version = event.plan_version
        self.plan_expected_g = event.expected_emissions_g
        self.plan_baseline_g = event.baseline_emissions_g
        if (
            self.first_plan is None
            and all(study.jobs for study in self.studies.values())
            and all(j.planned for j in self.jobs.values())
        ):
            self.first_plan = FirstPlan(
                event.plan_version,
                event.expected_emissions_g,
                event.baseline_emissions_g,
                sum(j.estimated_wh for j in self.jobs.values()),
                len(self.jobs),
            )

    def _on_Assignment(self, event: Assignment) -> None:
        job = self.jobs.get(event.job_id)
        if job is None:
            return
        if event.action in (AssignmentAction.start, AssignmentAction.resume):
            self._note(
                event, f"{event.action.value} {self._job_name(job.job_id)} at {event.datacenter}"
            )
        elif event.action == AssignmentAction.pause and not job.finished:
            job.pauses += 1
            self._note(event, f"pause {self._job_name(job.job_id)} at {event.datacenter}")

    def _on_RunProgress(self, event: RunProgress) -> None:
        job = self.jobs.get(event.job_id)
        if job is None or job.finished:
            return
        if not job.visited or job.visited[-1] != event.datacenter:
            if job.visited:
                job.migrations += 1
                self._note(
                    event,
                    f"{self._job_name(job.job_id)} migrated {job.visited[-1]} -> {event.datacenter} "
                    f"(resumed at step {event.step} from its checkpoint)",
                )
            job.visited.append(event.datacenter)
        job.status = "running"
        job.datacenter = event.datacenter
        job.step, job.total_steps = event.step, event.total_steps
        job.energy_wh = event.accounting.energy_wh
        job.emissions_g = event.accounting.emissions_g

    def _on_RunPaused(self, event: RunPaused) -> None:
        job = self.jobs.get(event.job_id)
        if job is None:
            return
        job.status, job.datacenter, job.step = "paused", event.datacenter, event.step
        job.energy_wh = event.accounting.energy_wh
        job.emissions_g = event.accounting.emissions_g
        self._note(
            event,
            f"{self._job_name(job.job_id)} paused at {event.datacenter}, step {event.step}, "
            f"checkpoint {event.checkpoint_key}",
        )

    def _on_RunCompleted(self, event: RunCompleted) -> None:
        job = self.jobs.get(event.job_id)
        if job is None:
            return
        job.status = EARLY_STOPPED if event.early_stopped else "completed"
        job.ended_at = event.occurred_at
        job.datacenter = event.datacenter
        job.step = event.steps
        job.metric = event.metrics.accuracy
        job.energy_wh = event.accounting.energy_wh
        job.emissions_g = event.accounting.emissions_g
        job.stop_reason = event.stop_reason
        what = trial_outcome(
            "completed",
            early_stopped=event.early_stopped,
            stop_reason=event.stop_reason,
            steps=event.steps,
        )
        metric = "" if job.metric is None else f", accuracy {job.metric:.3f}"
        self._note(event, f"{self._job_name(job.job_id)} {what} at {event.datacenter}{metric}")
        self._maybe_finished(event, job)

    def _on_RunFailed(self, event: RunFailed) -> None:
        job = self.jobs.get(event.job_id)
        if job is None:
            return
        job.status, job.failure = "failed", f"{event.reason.value}: {event.message}"
        job.ended_at = event.occurred_at
        self._note(event, f"{self._job_name(job.job_id)} failed: {job.failure}")
        self._maybe_finished(event, job)

    def _on_JobInfeasible(self, event: JobInfeasible) -> None:
        if event.job_id in self.jobs:
            self.infeasible += 1
            self._note(event, f"{self._job_name(event.job_id)} infeasible: {event.reason}")

    def _on_StudyStopped(self, event: StudyStopped) -> None:
        """Said once: the recommender requests no more trials (and, once all have ended, that the
        study finished: :meth:`_maybe_finished`)."""
        study = self.studies.get(event.study_id)
        if study is None or study.stopped is not None:
            return
        study.stopped = event
        unfinished = sum(not self.jobs[j].finished for j in study.jobs if j in self.jobs)
        study.finished = unfinished == 0
        state = study_state(event.reason.value, unfinished, self._deadline(study))
        self._note(event, f"{study.name}: {state}")

    def _maybe_finished(self, event: Event, job: JobView) -> None:
        study = self.studies.get(job.study_id)
        if study is None or study.stopped is None or study.finished:
            return
        if all(self.jobs[j].finished for j in study.jobs if j in self.jobs):
            study.finished = True
            state = study_state(study.stopped.reason.value, 0, self._deadline(study))
            self._note(event, f"{study.name}: {state}")

    def _deadline(self, study: StudyView) -> DeadlineOutcome | None:
        """How the study's ended trials stand against its deadline (metatune.deadlines)."""
        jobs = [self.jobs[j] for j in study.jobs if j in self.jobs]
        ends = [j.ended_at for j in jobs if j.ended_at is not None]
        if not jobs or not ends:
            return None
        return deadline_outcome(jobs[0].request.deadline, ends)

    def _on_ErrorEvent(self, event: ErrorEvent) -> None:
        self.errors.append(event)
        self._note(event, f"error from {event.service}: {event.code}: {event.message[:120]}")

    # ----------------------------------------------------------------- questions
    def done(self) -> bool:
        """Every study stopped and every trial it requested finished."""
        return all(
            s.stopped is not None and all(self.jobs[j].finished for j in s.jobs)
            for s in self.studies.values()
        )

    def pauses(self) -> int:
        return sum(j.pauses for j in self.jobs.values())

    def migrations(self) -> int:
        return sum(j.migrations for j in self.jobs.values())

    def early_stops(self) -> int:
        return sum(j.status == EARLY_STOPPED for j in self.jobs.values())

    def curve_stops(self) -> int:
        """Early stops by the learning-curve predictor (not the plateau rule)."""
        return sum(
            j.status == EARLY_STOPPED and (j.stop_reason or "").startswith("learning curve")
            for j in self.jobs.values()
        )

    def completions(self) -> int:
        return sum(j.status in ("completed", EARLY_STOPPED) for j in self.jobs.values())
