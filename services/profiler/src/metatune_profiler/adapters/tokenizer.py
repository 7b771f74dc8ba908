"""The base model's fast tokenizer, loaded once per model (from the embedded alias, a local
directory or the hub) for :func:`~..domain.tokenizer.count_tokens`."""

from __future__ import annotations

from functools import lru_cache

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from metatune.models import UnknownBaseModel, resolve_base_model

from ..domain.errors import ProfileUnknownBaseModel


@lru_cache(maxsize=4)
def load_tokenizer(base_model: str) -> PreTrainedTokenizerBase:
    """The fast tokenizer of ``base_model`` (embedded alias, local directory or hub id)."""
    try:
        reference = resolve_base_model(base_model)
    except UnknownBaseModel as exc:
        raise ProfileUnknownBaseModel(str(exc)) from exc
    try:
        return AutoTokenizer.from_pretrained(reference, use_fast=True)
    except Exception as exc:  # OSError, ValueError, hub errors: all mean "cannot use this model"
        raise ProfileUnknownBaseModel(
            f"cannot load the tokenizer of base model {base_model!r}: {exc}"
        ) from exc
