"""The base model's frozen features for the label probe (:class:`~..domain.probe.Encoder`): its
mean-pooled last hidden states, computed on the CPU in batches, the model loaded on first use (a
profile without a probe never loads it) and kept once per model."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
from transformers import AutoModel, PreTrainedModel

from metatune.models import resolve_base_model

from ..domain.errors import ProfileUnknownBaseModel
from .tokenizer import load_tokenizer

PROBE_TOKENS = 128  # tokens of each text (and its pair) the model reads: the seeds' sequence length
BATCH_ROWS = 32


class ModelEncoder:
    """``base_model``'s mean-pooled frozen embeddings of texts (and their pairs)."""

    def __init__(self, base_model: str) -> None:
        self.base_model = base_model

    def __call__(self, texts: Sequence[str], pairs: Sequence[str] | None) -> np.ndarray:
        tokenizer, model = load_tokenizer(self.base_model), _load_model(self.base_model)
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), BATCH_ROWS):
                batch = list(texts[start : start + BATCH_ROWS])
                second = None if pairs is None else list(pairs[start : start + BATCH_ROWS])
                encoded = tokenizer(
                    batch,
                    second,
                    padding=True,
                    truncation=True,
                    max_length=PROBE_TOKENS,
                    return_tensors="pt",
                )
                hidden = model(**encoded).last_hidden_state
                mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                chunks.append(((hidden * mask).sum(1) / mask.sum(1)).float().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 0))


@lru_cache(maxsize=2)
def _load_model(base_model: str) -> PreTrainedModel:
    try:
        model = AutoModel.from_pretrained(resolve_base_model(base_model))
    except Exception as exc:  # OSError, ValueError, hub errors: all mean "cannot use this model"
        raise ProfileUnknownBaseModel(
            f"cannot load base model {base_model!r} for the label probe: {exc}"
        ) from exc
    return model.eval()


__all__ = ["PROBE_TOKENS", "ModelEncoder"]
