"""Dataset submission and profile contracts."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal
from uuid import UUID

from pydantic import AwareDatetime, Field, HttpUrl, model_validator

from .base import Contract, Event


class TaskType(StrEnum):
    classification = "classification"
    pair_classification = "pair_classification"
    causal_lm = "causal_lm"


class RegionGroup(StrEnum):
    """Data-residency groups: a job restricted to one never runs outside it."""

    EU = "EU"
    NA = "NA"
    APAC = "APAC"
    SA = "SA"
    AF = "AF"


class CarbonPreference(StrEnum):
    greenest = "greenest"  # any delay up to the deadline
    balanced = "balanced"
    fastest = "fastest"  # start as soon as capacity allows


class DatasetFormat(StrEnum):
    csv = "csv"
    jsonl = "jsonl"
    parquet = "parquet"
    text = "text"


class DatasetLocation(Contract):
    """Where a dataset lives: a key in the NATS object store, a local path or a URL."""

    kind: Literal["object", "path", "url"]
    ref: str = Field(min_length=1, description="object-store key, filesystem path or URL")
    format: DatasetFormat | None = Field(None, description="None: detected from the name and content")
    size_bytes: int | None = Field(None, ge=0)
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")


class StudySpec(Contract):
    """What a user asks for: one dataset, one base model, a trial budget and a deadline."""

    dataset: DatasetLocation
    task: TaskType
    base_model: str = Field(min_length=1, description="local HF model directory, hub id or embedded alias")
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    deadline: AwareDatetime = Field(description="all trials must finish before this time (UTC)")
    trials: int = Field(3, ge=1, le=50, description="number of configurations to train")
    region_group: RegionGroup | None = Field(None, description="data residency; None means anywhere")
    home_datacenter: str | None = Field(None, description="submitter's datacenter (the run-now baseline)")
    carbon_preference: CarbonPreference = CarbonPreference.greenest
    webhook_url: HttpUrl | None = None

    @model_validator(mode="after")
    def _lm_has_no_label(self) -> StudySpec:
        if self.task == TaskType.causal_lm and self.label_column is not None:
            raise ValueError("a causal_lm study has no label column")
        return self


class DatasetSubmitted(Event):
    study_id: UUID
    spec: StudySpec


class MetaFeatures(Contract):
    """NLP meta-features of a dataset (definitions and references: profiler README).

    Counts are exact (one streaming pass); tokenizer-based features come from a seeded
    reservoir sample of ``sample_size`` rows.
    """

    n_examples: int = Field(ge=0)
    n_classes: int = Field(0, ge=0, description="0 for causal LM")
    label_entropy_bits: float = Field(0.0, ge=0)
    label_entropy_norm: float = Field(0.0, ge=0, le=1, description="entropy / log2(n_classes)")
    imbalance_ratio: float = Field(1.0, ge=1, description="largest class count / smallest")
    words_mean: float = Field(ge=0)
    words_p50: float = Field(ge=0)
    words_p95: float = Field(ge=0)
    words_max: int = Field(ge=0)
    tokens_mean: float = Field(ge=0, description="base-model tokens per example")
    tokens_p50: float = Field(ge=0)
    tokens_p95: float = Field(ge=0)
    tokens_max: int = Field(ge=0)
    padding_fraction_random: float = Field(ge=0, le=1, description="pad share at batch_size, random batches")
    padding_fraction_grouped: float = Field(ge=0, le=1, description="pad share at batch_size, length-grouped")
    padding_batch_size: int = Field(32, ge=1)
    ttr: float = Field(ge=0, le=1, description="types / tokens (falls with corpus size)")
    mattr: float = Field(ge=0, le=1, description="moving-average TTR (Covington & McFall 2010)")
    mattr_window: int = Field(ge=1)
    hapax_ratio: float = Field(ge=0, le=1, description="types seen once / types")
    zipf_alpha: float | None = Field(None, description="discrete power-law MLE exponent (Clauset et al. 2009)")
    zipf_alpha_se: float | None = Field(None, ge=0)
    zipf_xmin: int | None = Field(None, ge=1)
    vocab_size: int = Field(ge=0, description="distinct lower-cased word types")
    unk_rate: float = Field(ge=0, le=1, description="unknown tokens / tokens of the base tokenizer")
    fertility: float = Field(ge=0, description="base-model subword tokens per word")
    duplicate_rate: float = Field(ge=0, le=1, description="exact duplicate texts / examples")
    script_mix: dict[str, float] = Field(default_factory=dict, description="share of characters per script")
    is_pair: bool = False
    sample_size: int = Field(ge=0, description="rows in the reservoir sample behind tokenizer features")
    extra: dict[str, float] = Field(default_factory=dict, description="further features, documented in the profiler")


class DatasetProfiled(Event):
    study_id: UUID
    spec: StudySpec
    features: MetaFeatures
    rows_skipped: int = Field(0, ge=0)
    skip_reasons: dict[str, int] = Field(default_factory=dict)
