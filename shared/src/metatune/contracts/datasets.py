"""Dataset submission and profile contracts."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AwareDatetime,
    Field,
    HttpUrl,
    StringConstraints,
    field_validator,
    model_validator,
)

from ..tenancy import DEFAULT_TENANT, TENANT_PATTERN
from .base import Contract, Event, StudyId


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


StudyTag = Annotated[
    str,
    StringConstraints(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"),
]
"""A label a study is filed under: a letter or digit, then letters, digits and ``. _ : / -``."""


class DatasetLocation(Contract):
    """Where a dataset lives: a key in the NATS object store, a local path or a URL."""

    kind: Literal["object", "path", "url"] = Field(
        description="object: a key in the datasets bucket; path: a file under the data roots; url: public http(s)"
    )
    ref: str = Field(min_length=1, description="object-store key, filesystem path or URL")
    format: DatasetFormat | None = Field(
        None, description="None: detected from the name and content"
    )
    size_bytes: int | None = Field(None, ge=0, description="size of the file, where known")
    sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the file, where known"
    )


DEFAULT_EPOCHS = 3.0  # the Hugging Face Trainer's default: what a user expects a "training" to be
DEFAULT_MAX_TRAIN_ROWS = (
    1000  # 3 epochs over 1,000 rows: a trial of the embedded model in minutes on a CPU
)


class TrainingBudget(Contract):
    """How long each trial of a study trains: passes over its training split (or optimizer steps),
    over at most ``max_train_rows`` of the split's rows (a seeded sample, the same for every trial).

    Give ``epochs`` or ``max_steps``, not both; with neither, 3 epochs. The recommender predicts
    at this budget, prices it in GPU-hours and energy, the scheduler plans its hours and the agent
    trains it; every run records it in the knowledge base."""

    epochs: float | None = Field(
        DEFAULT_EPOCHS, gt=0, le=1000, description="passes over the training rows (default 3)"
    )
    max_steps: int | None = Field(
        None, ge=1, le=10_000_000, description="optimizer steps per trial, instead of epochs"
    )
    max_train_rows: int | None = Field(
        DEFAULT_MAX_TRAIN_ROWS,
        ge=10,
        le=1_000_000_000,
        description="training rows a trial uses at most (a seeded sample); null: every row",
    )

    @model_validator(mode="before")
    @classmethod
    def _steps_replace_epochs(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("max_steps") is not None and "epochs" not in data:
            return {**data, "epochs": None}
        return data

    @model_validator(mode="after")
    def _one_length(self) -> TrainingBudget:
        if self.epochs is not None and self.max_steps is not None:
            raise ValueError("give epochs or max_steps, not both")
        if self.epochs is None and self.max_steps is None:
            raise ValueError("give epochs or max_steps")
        return self

    @staticmethod
    def options(
        epochs: float | None = None,
        max_steps: int | None = None,
        max_train_rows: int | None = None,
    ) -> dict[str, float | int | None]:
        """The fields a command's ``--epochs``, ``--max-steps`` and ``--max-train-rows`` give
        (empty: none given); ``--max-steps`` alone drops the default epochs, and a row cap of 0
        means every row."""
        given: dict[str, float | int | None] = {}
        if epochs is not None:
            given["epochs"] = epochs
        if max_steps is not None:
            given["max_steps"] = max_steps
            given.setdefault("epochs", None)
        if max_train_rows is not None:
            given["max_train_rows"] = max_train_rows or None
        return given

    def train_rows(self, rows: int) -> int:
        """The rows a trial trains on when the data holds ``rows``: the cap where it bites."""
        return rows if self.max_train_rows is None else min(rows, self.max_train_rows)

    def lengths(self) -> dict[str, float | int | None]:
        """The :class:`~metatune.contracts.LoraConfig` fields this budget sets on every trial."""
        return {
            "epochs": self.epochs,
            "max_steps": self.max_steps,
            "max_train_rows": self.max_train_rows,
        }

    def describe(self) -> str:
        """``3 epochs over at most 1,000 rows``, ``500 steps over every row``: as views print it."""
        if self.max_steps is not None:
            length = f"{self.max_steps:,} step" + ("s" if self.max_steps != 1 else "")
        else:
            length = f"{self.epochs:g} epoch" + ("s" if self.epochs != 1 else "")
        rows = (
            "every row" if self.max_train_rows is None else f"at most {self.max_train_rows:,} rows"
        )
        return f"{length} over {rows}"


class StudySpec(Contract):
    """What a user asks for: one dataset, one base model, a trial budget and a deadline."""

    name: str | None = Field(
        None,
        min_length=1,
        max_length=80,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="what people call the study (every view shows it beside the id); "
        "metatune submit defaults it to the dataset file's name without its suffix",
    )
    tags: tuple[StudyTag, ...] = Field(
        (),
        max_length=20,
        description="labels a team files the study under (team, project, quarter...), in the "
        "order given, each once; `metatune study list --tag` selects by them",
    )
    tenant: str = Field(
        DEFAULT_TENANT,
        pattern=TENANT_PATTERN,
        description="the team the study belongs to: its dataset is read from that tenant's own "
        "bucket, and only that tenant's dashboard token shows it (metatune.tenancy)",
    )
    dataset: DatasetLocation = Field(description="where the training data is")
    task: TaskType = Field(description="what the adapter learns")
    base_model: str = Field(
        min_length=1, description="local HF model directory, hub id or embedded alias"
    )
    text_column: str | None = Field(None, description="column with the text; None: detected")
    text_pair_column: str | None = Field(
        None, description="second text column of a pair task; None: detected"
    )
    label_column: str | None = Field(
        None, description="column with the label; None: detected (never for causal_lm)"
    )
    deadline: AwareDatetime = Field(description="all trials must finish before this time (UTC)")
    trials: int = Field(3, ge=1, le=50, description="number of configurations to train")
    budget: TrainingBudget = Field(
        default_factory=TrainingBudget,
        description="how long each trial trains (default: 3 epochs over at most 1,000 rows)",
    )
    gpus_per_trial: int = Field(
        1,
        ge=1,
        le=64,
        description="devices each trial trains on, in one datacenter (data-parallel: torchrun + DDP)",
    )
    region_group: RegionGroup | None = Field(
        None, description="data residency; None means anywhere"
    )
    home_datacenter: str | None = Field(
        None, description="submitter's datacenter (the run-now baseline)"
    )
    carbon_preference: CarbonPreference = Field(
        CarbonPreference.greenest,
        description="greenest: any delay up to the deadline that saves carbon; balanced: waits only for a saving above 3 gCO2eq/kWh per hour of delay; fastest: earliest finish, carbon only breaking ties",
    )
    webhook_url: HttpUrl | None = Field(
        None,
        description="http(s) URL notified of the study's events; without credentials where "
        "webhook_sealed is set",
    )
    webhook_sealed: str | None = Field(
        None,
        description="the whole webhook URL, credentials included, sealed for telemetry's public "
        "key (base64 NaCl sealed box): only telemetry opens it (metatune.webhook_seal)",
    )

    @field_validator("tags")
    @classmethod
    def _each_tag_once(cls, tags: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tags))

    @model_validator(mode="after")
    def _sealed_has_a_url(self) -> StudySpec:
        if self.webhook_sealed is not None and self.webhook_url is None:
            raise ValueError("webhook_sealed needs the webhook_url it was sealed from")
        return self

    @model_validator(mode="after")
    def _lm_has_no_label(self) -> StudySpec:
        if self.task == TaskType.causal_lm and self.label_column is not None:
            raise ValueError("a causal_lm study has no label column")
        return self


class DatasetSubmitted(Event):
    study_id: StudyId
    spec: StudySpec = Field(description="what the user asks for")


class MetaFeatures(Contract):
    """NLP meta-features of a dataset (definitions and references: profiler README).

    Counts are exact (one streaming pass); tokenizer-based features come from a seeded
    reservoir sample of ``sample_size`` rows.
    """

    n_examples: int = Field(ge=0, description="rows used (after skipped rows)")
    n_classes: int = Field(0, ge=0, description="0 for causal LM")
    label_entropy_bits: float = Field(0.0, ge=0, description="Shannon entropy of the labels, bits")
    label_entropy_norm: float = Field(0.0, ge=0, le=1, description="entropy / log2(n_classes)")
    imbalance_ratio: float = Field(1.0, ge=1, description="largest class count / smallest")
    words_mean: float = Field(ge=0, description="whitespace words per example, mean")
    words_p50: float = Field(ge=0, description="words per example, median")
    words_p95: float = Field(ge=0, description="words per example, 95th percentile")
    words_max: int = Field(ge=0, description="words in the longest example")
    tokens_mean: float = Field(ge=0, description="base-model tokens per example")
    tokens_p50: float = Field(ge=0, description="base-model tokens per example, median")
    tokens_p95: float = Field(ge=0, description="base-model tokens per example, 95th percentile")
    tokens_max: int = Field(ge=0, description="base-model tokens in the longest example")
    padding_fraction_random: float = Field(
        ge=0, le=1, description="pad share at batch_size, random batches"
    )
    padding_fraction_grouped: float = Field(
        ge=0, le=1, description="pad share at batch_size, length-grouped"
    )
    padding_batch_size: int = Field(32, ge=1, description="batch size the padding fractions assume")
    ttr: float = Field(ge=0, le=1, description="types / tokens (falls with corpus size)")
    mattr: float = Field(ge=0, le=1, description="moving-average TTR (Covington & McFall 2010)")
    mattr_window: int = Field(ge=1, description="window of the MATTR, words")
    hapax_ratio: float = Field(ge=0, le=1, description="types seen once / types")
    zipf_alpha: float | None = Field(
        None, description="discrete power-law MLE exponent (Clauset et al. 2009)"
    )
    zipf_alpha_se: float | None = Field(None, ge=0, description="standard error of zipf_alpha")
    zipf_xmin: int | None = Field(
        None, ge=1, description="smallest word frequency the power law was fitted from"
    )
    vocab_size: int = Field(ge=0, description="distinct lower-cased word types")
    unk_rate: float = Field(ge=0, le=1, description="unknown tokens / tokens of the base tokenizer")
    fertility: float = Field(ge=0, description="base-model subword tokens per word")
    duplicate_rate: float = Field(ge=0, le=1, description="exact duplicate texts / examples")
    script_mix: dict[str, float] = Field(
        default_factory=dict, description="share of characters per script"
    )
    is_pair: bool = Field(False, description="examples are text pairs")
    probe_accuracy: float | None = Field(
        None,
        ge=0,
        le=1,
        description="5-fold accuracy of a logistic regression on the base model's frozen, mean-pooled"
        " embeddings of probe_rows (300) sampled labelled rows (a landmarker: how separable the"
        " labels are to that model before tuning); None with fewer such rows, without labels, or"
        " with more labels than half the rows",
    )
    sample_size: int = Field(
        ge=0, description="rows in the reservoir sample behind tokenizer features"
    )
    extra: dict[str, float] = Field(
        default_factory=dict, description="further features, documented in the profiler"
    )


class DatasetProfiled(Event):
    study_id: StudyId
    spec: StudySpec = Field(description="the study as submitted")
    features: MetaFeatures = Field(description="what the profiler measured")
    rows_skipped: int = Field(
        0, ge=0, description="rows left out (empty, unreadable, over the size limit)"
    )
    skip_reasons: dict[str, int] = Field(
        default_factory=dict, description="rows skipped per reason code"
    )
