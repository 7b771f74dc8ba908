"""Paths of the files the trainer agent ships with (``data/``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_model_path() -> Path:
    """The learning-curve stopper's model, written by ``metatune kb fit-stopper``."""
    return Path(str(resources.files("metatune_trainer_agent") / "data" / "curve_stopper.json"))
