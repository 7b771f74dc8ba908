"""Paths of the files the forecaster ships with: the model, its weather-error calibration and the
replay extract (``data/``, built by the tools in :mod:`metatune_forecaster.tools`)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
MODEL_PATH = DATA_DIR / "model.joblib"
WEATHER_ERROR_PATH = DATA_DIR / "weather_error.json"
REPLAY_PATH = DATA_DIR / "replay.parquet"
