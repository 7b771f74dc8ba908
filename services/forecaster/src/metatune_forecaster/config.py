"""Forecaster settings (``METATUNE_FORECASTER_*``), beside the platform-wide ``METATUNE_*`` ones."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .resources import MODEL_PATH, REPLAY_PATH, WEATHER_ERROR_PATH


class ForecasterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="METATUNE_FORECASTER_", env_file=".env", extra="ignore")

    weather: Literal["replay", "open-meteo"] = Field(
        "replay", description="Weather source: the embedded replay extract, or the Open-Meteo API"
    )
    model_path: Path = Field(MODEL_PATH, description="Trained model artifact")
    replay_path: Path = Field(REPLAY_PATH, description="Replay extract (intensity history, and weather if replayed)")
    weather_error_path: Path = Field(WEATHER_ERROR_PATH, description="Forecast-error model of replayed weather")
    open_meteo_url: str = Field("https://api.open-meteo.com/v1/forecast", description="Open-Meteo forecast endpoint")
    open_meteo_timeout_s: float = Field(10.0, gt=0, description="Seconds per Open-Meteo request")
    open_meteo_retries: int = Field(3, ge=0, description="Retries of a failed Open-Meteo request")
    open_meteo_backoff_s: float = Field(1.0, ge=0, description="First retry delay, doubled per retry")
