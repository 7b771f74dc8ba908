"""Trial (job) contracts: what the recommender asks the scheduler to run."""

from __future__ import annotations

from enum import StrEnum

from pydantic import AwareDatetime, Field, model_validator

from ..tenancy import DEFAULT_TENANT, TENANT_PATTERN
from .base import Contract, Event, JobId, OptionalStudyId, StudyId
from .datasets import StudySpec


class LrSchedule(StrEnum):
    linear = "linear"
    cosine = "cosine"
    constant = "constant"


class LoraConfig(Contract):
    """One LoRA fine-tuning configuration; ranges are what a run can sensibly use.

    The defaults are the seed knowledge base's most robust configuration, rounded (the first entry
    of ``metatune kb portfolio``: best mean normalised accuracy over its 12 datasets), not a guess.
    """

    rank: int = Field(8, ge=1, le=1024, description="LoRA rank r")
    alpha: float = Field(4.0, gt=0, description="LoRA alpha (the update is scaled by alpha / rank)")
    dropout: float = Field(0.14, ge=0, lt=1, description="dropout on the LoRA input")
    target_modules: list[str] | None = Field(
        None, description="None: the base model's attention projections"
    )
    learning_rate: float = Field(2.5e-3, gt=0, le=1, description="peak learning rate (AdamW)")
    lr_schedule: LrSchedule = Field(LrSchedule.constant, description="decay after warm-up")
    warmup_ratio: float = Field(0.2, ge=0, le=1, description="share of the steps spent warming up")
    weight_decay: float = Field(0.0, ge=0, le=1, description="AdamW weight decay")
    batch_size: int = Field(
        8, ge=1, le=4096, description="examples per optimizer step, per accumulation"
    )
    grad_accum_steps: int = Field(1, ge=1, le=1024, description="micro-batches per optimizer step")
    epochs: float | None = Field(
        1.0, gt=0, description="passes over the training split (max_steps wins when set)"
    )
    max_steps: int | None = Field(None, ge=1, description="optimizer steps; None: from epochs")
    max_train_rows: int | None = Field(
        None, ge=1, description="training rows used at most (a seeded sample); None: every row"
    )
    max_seq_length: int = Field(
        128, ge=8, le=32768, description="longer examples are truncated, tokens"
    )
    seed: int = Field(13, description="seed of initialisation, shuffling and dropout")

    @model_validator(mode="after")
    def _has_length(self) -> LoraConfig:
        if self.epochs is None and self.max_steps is None:
            raise ValueError("set epochs or max_steps")
        return self

    def examples_seen(self, rows: int) -> float:
        """Examples a run of this configuration trains on over a split of ``rows`` rows: its steps
        times the effective batch, or its epochs over the rows its row cap leaves."""
        if self.max_steps is not None:
            return float(self.max_steps * self.batch_size * self.grad_accum_steps)
        if self.max_train_rows is not None:
            rows = min(rows, self.max_train_rows)
        return rows * (self.epochs or 1.0)


class PredictionSource(StrEnum):
    knowledge_base = "knowledge-base"
    cold_start = "cold-start"


class JobRequested(Event):
    job_id: JobId
    study_id: StudyId
    trial_index: int = Field(ge=0, description="0-based index of the trial in its study")
    spec: StudySpec = Field(description="the study this trial belongs to")
    config: LoraConfig = Field(description="the configuration to train")
    predicted_loss: float | None = Field(None, description="predicted validation loss")
    predicted_loss_std: float | None = Field(
        None, ge=0, description="standard deviation of predicted_loss"
    )
    predicted_metric: float | None = Field(
        None, description="the recommender's prediction of the objective"
    )
    predicted_metric_std: float | None = Field(
        None, ge=0, description="standard deviation of predicted_metric"
    )
    predicted_metric_interval: tuple[float, float] | None = Field(
        None,
        description="the 80 % interval the recommender publishes for predicted_metric "
        "(calibrated leaving each knowledge-base dataset out)",
    )
    rationale: str | None = Field(
        None, max_length=500, description="why the recommender chose this configuration"
    )
    metric_name: str | None = Field(
        None, description="the objective predicted: accuracy, neg_perplexity..."
    )
    prediction_source: PredictionSource | None = Field(
        None,
        description="knowledge-base (the GP recommender) or cold-start (the documented portfolio)",
    )
    acquisition: str | None = Field(
        None, description="how the trial was chosen: top-k, expected-improvement"
    )
    imputed_features: list[str] = Field(
        default_factory=list,
        description="meta-features the profile lacked, filled from the knowledge base",
    )
    gpus: int = Field(1, ge=1, le=64, description="GPUs the job occupies while running")
    estimated_gpu_hours: float = Field(gt=0, description="GPU-hours to finish (all GPUs together)")
    power_kw: float = Field(gt=0, description="IT power draw of the whole job while running, kW")
    deadline: AwareDatetime = Field(description="the job must finish before this time (UTC)")
    earliest_start: AwareDatetime | None = Field(
        None,
        description="not to run before this (its data lands later): a job announced ahead lets the "
        "scheduler keep clean room for it (see the scheduler README)",
    )

    @model_validator(mode="after")
    def _starts_before_deadline(self) -> JobRequested:
        if self.earliest_start is not None and self.earliest_start >= self.deadline:
            raise ValueError("earliest_start must be before the deadline")
        return self


class InfeasibleSituation(StrEnum):
    late = "late"  # the datacenters it may use cannot finish it by its deadline
    no_datacenter = "no_datacenter"  # no datacenter of its region group is available
    too_large = "too_large"  # it needs more GPUs than any allowed datacenter has


class InfeasibleAction(StrEnum):
    run_late = "run_late"  # keep it planned and let it finish after the deadline
    drop = "drop"  # withdraw it (a JobCancelled)
    relax_residency = "relax_residency"  # let it run outside its region group


class InfeasibleOption(Contract):
    """One way out for a job that cannot meet its deadline."""

    action: InfeasibleAction = Field(description="run_late, drop or relax_residency")
    earliest_finish: AwareDatetime | None = Field(
        None, description="when the job would finish this way; None: not known or not applicable"
    )
    how: str = Field(description="what to do to choose this option")


class JobInfeasible(Event):
    """A job whose deadline cannot hold (or that cannot run at all where it may run). Sent once
    per change of its situation, not at every re-plan; the job is never dropped silently: the
    scheduler applies ``policy`` until told otherwise."""

    job_id: JobId
    study_id: OptionalStudyId = None
    reason: str = Field(description="why no plan meets the deadline")
    earliest_finish: AwareDatetime | None = Field(
        None, description="earliest finish the scheduler can offer"
    )
    situation: InfeasibleSituation = Field(
        InfeasibleSituation.late, description="late, no_datacenter or too_large"
    )
    deadline: AwareDatetime | None = Field(
        None, description="the deadline the job was requested with"
    )
    policy: InfeasibleAction = Field(
        InfeasibleAction.run_late,
        description="what the scheduler does meanwhile: run_late (it stays planned, finishing after "
        "its deadline, or waits for a datacenter it may use)",
    )
    options: list[InfeasibleOption] = Field(
        default_factory=list, description="the choices open to the submitter"
    )


class JobCancelled(Event):
    """A user or another system withdraws a requested job: the scheduler stops it where it runs
    (a ``stop`` assignment), drops it from the plan and never starts it again."""

    job_id: JobId
    study_id: OptionalStudyId = None
    tenant: str = Field(
        DEFAULT_TENANT,
        pattern=TENANT_PATTERN,
        description="the tenant cancelling (the subject's last token): only its own jobs stop",
    )
    reason: str = Field(
        "cancelled by the user",
        min_length=1,
        max_length=2000,
        description="why: kept in the log and sent to the study's webhook",
    )


class StopReason(StrEnum):
    budget = "budget"  # the study's trial budget (spec.trials) is spent
    expected_improvement = (
        "expected_improvement"  # the best EI fell below the recommender's threshold
    )
    cancelled = "cancelled"  # a user cancelled the whole study (StudyCancelled)


class StudyCancelled(Event):
    """A user or another system cancels a whole study: the recommender requests no more of its
    trials (one ``StudyStopped``, reason ``cancelled``); the trials not ended are withdrawn each
    by its own ``JobCancelled``."""

    study_id: StudyId
    tenant: str = Field(
        DEFAULT_TENANT,
        pattern=TENANT_PATTERN,
        description="the tenant cancelling (the subject's last token): only its own studies stop",
    )
    reason: str | None = Field(
        None,
        min_length=1,
        max_length=2000,
        description="why, kept in the log (None: not given)",
    )


class StudyStopped(Event):
    """The recommender requests no more trials for a study, and why."""

    study_id: StudyId
    reason: StopReason = Field(
        description="budget: spec.trials spent; expected_improvement: best EI under threshold; "
        "cancelled: the study was cancelled (StudyCancelled)"
    )
    trials_requested: int = Field(
        ge=0, description="trials the recommender requested for the study"
    )
    trials_finished: int = Field(ge=0, description="of which completed or failed")
    best_expected_improvement: float | None = Field(
        None, description="normalised units (per-task standard scores)"
    )
    threshold: float | None = Field(
        None, description="the EI threshold it stopped under, normalised units"
    )
    best_metric: float | None = Field(None, description="best objective value of the study's runs")
    metric_name: str | None = Field(
        None, description="name of that objective: accuracy, neg_perplexity..."
    )
