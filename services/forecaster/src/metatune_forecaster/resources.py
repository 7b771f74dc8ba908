"""Paths of the files the forecaster ships with (model, weather-error calibration, replay extract)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
MODEL_PATH = DATA_DIR / "model.joblib"
WEATHER_ERROR_PATH = DATA_DIR / "weather_error.json"
REPLAY_PATH = DATA_DIR / "replay.parquet"
