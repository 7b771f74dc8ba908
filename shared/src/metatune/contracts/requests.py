"""Request/reply contracts: what a submitter may ask the platform before it publishes, and what
the platform's tools ask a service of what only it holds (the recommender's knowledge base).

Requests go over core NATS (not JetStream) and are answered on the requester's own inbox, so an
outside publisher that may read no subject still hears back (see :mod:`metatune.bus.auth`).
"""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import Field

from .base import Contract
from .datasets import StudySpec

JobState = Literal[
    "requested", "assigned", "running", "paused", "finished", "cancelled", "infeasible"
]


class JobLookup(Contract):
    """Where a job stands, asked of the scheduler (``metatune cancel`` checks before it cancels)."""

    job_id: UUID = Field(description="the job (trial) to look up")


class JobLookupReply(Contract):
    """The scheduler's answer: whether it knows the job, its study and where it stands."""

    job_id: UUID = Field(description="the job looked up")
    known: bool = Field(description="False: the scheduler has never seen this job requested")
    study_id: UUID | None = Field(None, description="the job's study (None: an unknown job)")
    state: JobState | None = Field(None, description="where the job stands (None: an unknown job)")


class DatasetValidation(Contract):
    """A submission's draft, checked by the profiler against its dataset before it is published."""

    spec: StudySpec = Field(
        description="the study as it would be submitted; its dataset is already uploaded"
    )


class DatasetValidationReply(Contract):
    """The profiler's answer: what would make it refuse the submission (empty: none found)."""

    problems: list[str] = Field(
        default_factory=list,
        description="one line each, starting with the field it is about (e.g. label_column)",
    )


class KnowledgeRuns(Contract):
    """How many runs of these studies the knowledge base holds, asked of the recommender (the demo
    waits until every finished trial has landed there)."""

    study_ids: list[UUID] = Field(
        min_length=1, max_length=1000, description="the platform studies to count runs of"
    )


class KnowledgeRunsReply(Contract):
    """The recommender's answer: per study asked, its runs in the knowledge base (failed ones
    too; a study with none: 0)."""

    runs: dict[UUID, int] = Field(description="study id -> runs stored")


class KnowledgeEvidence(Contract):
    """What the knowledge base measured on the datasets nearest each study's, asked of the
    recommender (the demo sets it beside each study's best trial and its prediction)."""

    study_ids: list[UUID] = Field(
        min_length=1, max_length=100, description="the platform studies (profiled) to answer for"
    )


class NearestDataset(Contract):
    """A knowledge-base dataset near a study's, with the best run measured on it."""

    dataset: str = Field(description="the knowledge base's name of the dataset")
    similarity: float = Field(ge=0, le=1, description="the recommender's task weight, rounded")
    best_measured: float = Field(description="the best metric its runs measured at the budget")
    runs: int = Field(ge=1, description="runs measured at the reference budget")
    majority_baseline: float | None = Field(
        None, description="the share of its most common label, where recorded"
    )


class StudyEvidence(Contract):
    """One study's evidence: its nearest measured datasets, or why there are none (``error``)."""

    base_model: str | None = Field(None, description="the knowledge base's base model used")
    metric_name: str | None = Field(None, description="the metric the figures are in")
    budget: str | None = Field(
        None, description="the reference budget in words, e.g. '2 epochs over 1500 rows'"
    )
    nearest: list[NearestDataset] = Field(default_factory=list, description="nearest first")
    error: str | None = Field(None, description="why no evidence: no profile, no other dataset")


class KnowledgeEvidenceReply(Contract):
    """The recommender's answer: per study asked, its evidence."""

    evidence: dict[UUID, StudyEvidence] = Field(description="study id -> its evidence")


__all__ = [
    "DatasetValidation",
    "DatasetValidationReply",
    "JobLookup",
    "JobLookupReply",
    "JobState",
    "KnowledgeEvidence",
    "KnowledgeEvidenceReply",
    "KnowledgeRuns",
    "KnowledgeRunsReply",
    "NearestDataset",
    "StudyEvidence",
]
