"""Load a base model with a LoRA adapter for the task.

Newly initialised modules (a classification head, or the LM head of an encoder used as a
decoder, e.g. the embedded MiniLM as ``BertLMHeadModel``) are trained and saved with the
adapter (peft ``modules_to_save``), so an adapter or a checkpoint never depends on the random
initialisation of the machine that loads it. Weights tied to pretrained ones are left alone.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any

import transformers
from peft import LoraConfig as PeftLoraConfig
from peft import TaskType as PeftTaskType
from peft import get_peft_model
from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
)

from metatune.contracts import LoraConfig, TaskType
from metatune.models import UnknownBaseModel, resolve_base_model

from ..domain.errors import InvalidTrainingConfig, TrainingUnknownBaseModel
from ..domain.model import new_modules

log = logging.getLogger("metatune.agent.model")
_LOADING = threading.Lock()
GRADIENT_CHECKPOINTING_WARNING = r"`is_gradient_checkpointing` is deprecated"
PEFT_ADDS = {
    PeftTaskType.SEQ_CLS: ("classifier", "score")
}  # its PeftModelForSequenceClassification


def load_tokenizer(base_model: str) -> tuple[Any, str]:
    source = _resolve(base_model)
    try:
        with _LOADING:
            tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise TrainingUnknownBaseModel(
            f"cannot load a tokenizer for {base_model!r}: {exc}"
        ) from exc
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise TrainingUnknownBaseModel(
                f"tokenizer of {base_model!r} has neither a pad nor an end-of-sequence token"
            )
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, source


def load_model(
    source: str, task: TaskType, config: LoraConfig, *, num_labels: int, pad_token_id: int
) -> nn.Module:
    """The base model for ``task`` wrapped in a fresh LoRA adapter (call under a seeded RNG)."""
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    with _LOADING:
        return _load_model(source, task, config, num_labels=num_labels, pad_token_id=pad_token_id)


def _load_model(
    source: str, task: TaskType, config: LoraConfig, *, num_labels: int, pad_token_id: int
) -> nn.Module:
    try:
        hf_config = AutoConfig.from_pretrained(source)
        if task == TaskType.causal_lm:
            hf_config.is_decoder = True  # encoders (BERT) become decoders with a causal mask
            # output_loading_info=True returns (model, info); transformers annotates the model only
            model, info = AutoModelForCausalLM.from_pretrained(  # type: ignore[misc]
                source, config=hf_config, output_loading_info=True
            )
            peft_task = PeftTaskType.CAUSAL_LM
        else:
            if num_labels < 2:
                raise InvalidTrainingConfig(
                    f"classification needs at least 2 labels, the dataset has {num_labels}"
                )
            hf_config.num_labels = num_labels
            hf_config.pad_token_id = (
                hf_config.pad_token_id if hf_config.pad_token_id is not None else pad_token_id
            )
            model, info = AutoModelForSequenceClassification.from_pretrained(
                source, config=hf_config, output_loading_info=True
            )
            peft_task = PeftTaskType.SEQ_CLS
    except (OSError, ValueError, KeyError) as exc:
        raise TrainingUnknownBaseModel(f"cannot load {source!r} for {task.value}: {exc}") from exc

    targets: list[str] | str | None = config.target_modules
    if targets == ["all-linear"]:  # peft's shorthand is a plain string, a list names modules
        targets = "all-linear"
    if (
        targets is None
        and hf_config.model_type not in TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    ):
        targets = "all-linear"
    fresh = new_modules(model, info.get("missing_keys", ()))
    try:
        peft_config = PeftLoraConfig(
            task_type=peft_task,
            r=config.rank,
            lora_alpha=config.alpha,  # type: ignore[arg-type]  # PEFT annotates int; scales by alpha / r
            lora_dropout=config.dropout,
            target_modules=targets,
            # peft adds a classification head to modules_to_save itself: named once
            modules_to_save=[m for m in fresh if m not in PEFT_ADDS.get(peft_task, ())] or None,
        )
        with warnings.catch_warnings():
            # peft reads transformers' deprecated `is_gradient_checkpointing` as it wraps a model
            warnings.filterwarnings("ignore", GRADIENT_CHECKPOINTING_WARNING, FutureWarning)
            return get_peft_model(model, peft_config)
    except ValueError as exc:
        raise InvalidTrainingConfig(
            f"LoRA targets {targets!r} do not fit {source!r}: {exc}"
        ) from exc


def _resolve(base_model: str) -> str:
    try:
        return resolve_base_model(base_model)
    except UnknownBaseModel as exc:
        raise TrainingUnknownBaseModel(str(exc)) from exc
