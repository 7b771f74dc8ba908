"""Scheduler output contracts: assignments to one datacenter and the whole plan."""

from __future__ import annotations

from enum import StrEnum
from uuid import UUID

from pydantic import AwareDatetime, Field

from .base import Contract, DatacenterName, Event, JobId, StudyId
from .datasets import StudySpec
from .jobs import LoraConfig


class AssignmentAction(StrEnum):
    start = "start"
    pause = "pause"
    resume = "resume"
    stop = "stop"


class Assignment(Event):
    """A change for one job at one datacenter. ``event_id`` is deterministic per change, so a
    re-sent assignment is de-duplicated by JetStream and ignored by the agent."""

    job_id: JobId
    study_id: StudyId
    datacenter: DatacenterName
    action: AssignmentAction = Field(description="start, pause, resume or stop")
    plan_version: int = Field(
        ge=0, description="version of the plan that made it; an agent ignores older ones"
    )
    spec: StudySpec | None = Field(None, description="needed for start / resume")
    config: LoraConfig | None = Field(
        None, description="the configuration to train (start / resume)"
    )
    gpus: int = Field(1, ge=1, description="GPUs to use")
    checkpoint_key: str | None = Field(None, description="object-store key to resume from")
    hours_planned: float = Field(0.0, ge=0, description="hours scheduled in this stretch")
    estimated_gpu_hours: float | None = Field(
        None, gt=0, description="GPU-hours the job still needs"
    )


class PlanEntry(Contract):
    """Where and in which hours one job is planned to run."""

    job_id: JobId
    datacenter: DatacenterName
    hours: list[AwareDatetime] = Field(description="start of each planned hour at this datacenter")
    emissions_g: float = Field(ge=0, description="expected emissions of these hours, gCO2eq")


class Plan(Event):
    """One version of the plan, or (``changes_only``) what changed since the previous version,
    in ``parts`` events so that each stays under the bus's payload limit with 10,000+ jobs.

    A reader folds a ``changes_only`` part by replacing the entries of each job it lists and
    dropping ``removed_jobs``; every job's entries sit in one part, so parts fold in any order.
    The totals (emissions, baseline, solve time, gap) are the whole version's, in every part."""

    plan_version: int = Field(ge=0, description="increases with every re-plan")
    horizon_start: AwareDatetime = Field(description="first hour of the plan (UTC)")
    entries: list[PlanEntry] = Field(
        description="one per job and datacenter stretch (changes_only: changed jobs only)"
    )
    expected_emissions_g: float = Field(ge=0, description="gCO2eq of the plan")
    baseline_emissions_g: float = Field(ge=0, description="gCO2eq of running every job now at home")
    solve_seconds: float = Field(ge=0, description="time the solver took, s")
    mip_gap: float | None = Field(
        None, ge=0, description="relative MIP gap at the end of the solve"
    )
    infeasible_jobs: list[UUID] = Field(
        default_factory=list,
        description=(
            "jobs this version cannot finish by their deadline (a full solve also sends JobInfeasible; a fast-path "
            "version lists new jobs the current plan has no room for, which the next full solve decides)"
        ),
    )
    changes_only: bool = Field(
        False, description="entries are the jobs whose plan changed since the previous version"
    )
    removed_jobs: list[UUID] = Field(
        default_factory=list, description="jobs no longer planned (changes_only)"
    )
    part: int = Field(0, ge=0, description="index of this event among the version's parts")
    parts: int = Field(1, ge=1, description="how many events carry this version")


class CurrentAssignment(Contract):
    """A job's latest assignment, kept by the scheduler in KV ``metatune_assignments`` (key: job id).

    An agent reads it before it starts or resumes a job: a redelivered older assignment (a start
    after a later pause, stop or move elsewhere) differs from it and is ignored, so a killed
    agent's unacknowledged start never makes two agents train one job."""

    event_id: UUID
    datacenter: str
    action: AssignmentAction
    plan_version: int = Field(ge=0)

    @classmethod
    def of(cls, assignment: Assignment) -> CurrentAssignment:
        return cls(
            event_id=assignment.event_id,
            datacenter=assignment.datacenter,
            action=assignment.action,
            plan_version=assignment.plan_version,
        )

    def supersedes(self, assignment: Assignment) -> bool:
        """Whether ``assignment`` is older than this record (same job): it must not be executed."""
        return self.event_id != assignment.event_id and self.plan_version >= assignment.plan_version
