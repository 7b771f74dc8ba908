"""What one training run needs: the data, the model, the LoRA configuration and the efficiency levers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metatune.contracts import DatasetFormat, LoraConfig, TaskType

from .errors import InvalidTrainingConfig

Precision = Literal["auto", "fp32", "bf16", "fp16"]


class TrainOptions(BaseModel):
    """Efficiency levers and cadences. Each lever can be switched off; defaults are what helps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(
        "auto", description="'auto' (CUDA when present), 'cpu', 'cuda', 'cuda:1', ..."
    )
    precision: Precision = Field(
        "auto",
        description="auto: bf16 autocast on GPUs that support it, else fp16 with a grad scaler; on CPU bf16 where "
        "the CPU has native bf16 (AVX512-BF16, AMX), else fp32",
    )
    dynamic_padding: bool = Field(
        True, description="pad each batch to its longest sequence, not max_seq_length"
    )
    group_by_length: bool = Field(True, description="batch sequences of similar length together")
    pad_to_multiple_of: int | None = Field(
        None, ge=1, description="None: 8 on GPU (tensor cores), 1 on CPU"
    )
    smoke_test: bool = Field(
        True, description="two forward/backward passes (longest batch first) before the run"
    )
    probe_batch_size: bool | None = Field(
        None, description="halve the micro-batch on OOM; None: on GPU only"
    )
    early_stopping: bool = True
    patience: int = Field(
        4, ge=1, description="evaluations without a new best before a plateau may be called"
    )
    plateau_window: int = Field(5, ge=3, description="evaluations in the trend regression")
    min_rel_improvement: float = Field(
        0.01,
        ge=0,
        description="a gain smaller than this share of the gain so far counts as no gain",
    )
    eval_every: int | None = Field(
        None, ge=1, description="optimizer steps between evaluations; None: 10 per run"
    )
    max_eval_examples: int = Field(512, ge=1, description="held-out examples scored per evaluation")
    val_fraction: float = Field(
        0.1, gt=0, lt=1, description="share of rows held out when the data has no split column"
    )
    checkpoint_every: int | None = Field(
        None, ge=1, description="optimizer steps between checkpoints; None: never"
    )
    cache_dir: Path | None = Field(None, description="tokenization cache; None: no cache")
    deterministic: bool = Field(
        False, description="torch deterministic algorithms (bit-exact resume on GPU)"
    )


class TrainingRequest(BaseModel):
    """One run, independent of where it came from (an assignment or the local CLI)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: Path
    dataset_format: DatasetFormat | None = None
    task: TaskType
    base_model: str
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    config: LoraConfig = LoraConfig()
    options: TrainOptions = TrainOptions()


CONFIG_ALIASES = {
    "r": "rank",
    "lr": "learning_rate",
    "schedule": "lr_schedule",
    "warmup": "warmup_ratio",
    "wd": "weight_decay",
    "bs": "batch_size",
    "accum": "grad_accum_steps",
    "seq_len": "max_seq_length",
    "max_len": "max_seq_length",
}
_LIST_FIELDS = {"target_modules"}


def apply_overrides(
    config: LoraConfig, options: TrainOptions, overrides: dict[str, str]
) -> tuple[LoraConfig, TrainOptions]:
    """Apply ``key=value`` strings (CLI ``--set``) to the LoRA config or the options; validate both."""
    config_values: dict[str, Any] = config.model_dump()
    option_values: dict[str, Any] = options.model_dump()
    for raw_key, raw_value in overrides.items():
        key = CONFIG_ALIASES.get(raw_key, raw_key)
        value: Any = raw_value
        if key in _LIST_FIELDS:
            value = [part.strip() for part in raw_value.split(",") if part.strip()] or None
        elif raw_value.lower() in {"none", "null"}:
            value = None
        if key in LoraConfig.model_fields:
            config_values[key] = value
        elif key in TrainOptions.model_fields:
            option_values[key] = value
        else:
            known = sorted({*LoraConfig.model_fields, *TrainOptions.model_fields, *CONFIG_ALIASES})
            raise InvalidTrainingConfig(f"unknown setting {raw_key!r}; known: {', '.join(known)}")
    return validate_config(config_values), _validate_options(option_values)


def validate_config(values: dict[str, Any]) -> LoraConfig:
    """A LoraConfig from untrusted values, or :class:`InvalidTrainingConfig` naming each bad field."""
    try:
        return LoraConfig.model_validate(values)
    except ValidationError as exc:
        raise InvalidTrainingConfig(f"invalid LoRA configuration: {describe(exc)}") from exc


def _validate_options(values: dict[str, Any]) -> TrainOptions:
    try:
        return TrainOptions.model_validate(values)
    except ValidationError as exc:
        raise InvalidTrainingConfig(f"invalid training option: {describe(exc)}") from exc


def describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}={err.get('input')!r}: {err['msg']}")
    return "; ".join(parts)
