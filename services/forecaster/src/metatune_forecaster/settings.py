"""The settings of the forecaster, over the platform's (:class:`metatune.settings.Settings`):
the same ``METATUNE_*`` environment variables, the same ``.env``; the README's configuration
table lists them under their service."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from metatune.settings import Settings


class ForecasterSettings(Settings):
    """The forecaster's own: its weather and the live intensity sources.

    Which source feeds a region is the registry's ``intensity_source``."""

    forecaster_weather: Literal["replay", "open-meteo"] = Field(
        "replay",
        description="Forecaster weather source: the embedded replay extract, or the Open-Meteo API",
    )
    forecaster_model_path: Path | None = Field(
        None,
        description="Forecaster model artifact (default: the one embedded in the forecaster package)",
    )
    forecaster_replay_path: Path | None = Field(
        None,
        description="Replay extract of intensity history and weather (default: the embedded one)",
    )
    forecaster_weather_error_path: Path | None = Field(
        None, description="Forecast-error model of the replayed weather (default: the embedded one)"
    )
    open_meteo_url: str = Field(
        "https://api.open-meteo.com/v1/forecast", description="Open-Meteo forecast endpoint"
    )
    open_meteo_timeout_s: float = Field(10.0, gt=0, description="Seconds per Open-Meteo request")
    open_meteo_retries: int = Field(
        3, ge=0, description="Retries of a failed Open-Meteo request (timeouts, 429, 5xx)"
    )
    open_meteo_backoff_s: float = Field(
        1.0, ge=0, description="First Open-Meteo retry delay in seconds, doubled per retry"
    )
    electricitymaps_url: str = Field(
        "https://api.electricitymaps.com", description="Electricity Maps API base URL"
    )
    electricitymaps_token_file: Path | None = Field(
        None, description="File holding the Electricity Maps API token (auth-token header)"
    )
    electricitymaps_forecast: bool = Field(
        False, description="Read Electricity Maps' own forecast (plans that include /forecast)"
    )
    watttime_url: str = Field("https://api.watttime.org", description="WattTime API base URL")
    watttime_username: str = Field("", description="WattTime API user name")
    watttime_password_file: Path | None = Field(
        None, description="File holding the password of watttime_username"
    )
    uk_carbon_intensity_url: str = Field(
        "https://api.carbonintensity.org.uk",
        description="GB Carbon Intensity API base URL (free, no key)",
    )
    uk_carbon_intensity_forecast: bool = Field(
        True,
        description="Read the GB Carbon Intensity API's own 48 h forecast (/fw48h) and blend it in; false: the model alone",
    )
    eia_url: str = Field(
        "https://api.eia.gov", description="EIA Open Data API base URL (EIA-930 hourly generation)"
    )
    eia_api_key_file: Path | None = Field(
        None,
        description="File holding the EIA Open Data API key (free; sent as its api_key parameter)",
    )
    carbon_aware_sdk_url: str = Field(
        "http://127.0.0.1:8080", description="Base URL of a Carbon Aware SDK WebAPI you run"
    )
    carbon_aware_sdk_signal: Literal["average", "marginal"] = Field(
        "marginal",
        description="What the Carbon Aware SDK's data source measures: marginal (WattTime) or average (Electricity Maps)",
    )
    carbon_aware_sdk_factors: Literal["direct", "lifecycle"] = Field(
        "direct",
        description="Emission factors of the Carbon Aware SDK's data source: direct (WattTime) or what its Electricity Maps source asks",
    )
    emission_factors: Literal["direct", "lifecycle"] = Field(
        "direct",
        description="Emission factors of every intensity (direct: the model's); a source or "
        "response of the other kind is refused",
    )
    intensity_timeout_s: float = Field(
        10.0, gt=0, description="Seconds per request to an intensity source"
    )
    intensity_retry_budget_s: float = Field(
        60.0,
        ge=0,
        description="Seconds a failing intensity request (429, 5xx, timeouts) is retried before the source counts as down",
    )
    intensity_retry_initial_s: float = Field(
        1.0, gt=0, description="First retry delay of an intensity request; doubles"
    )
    intensity_retry_max_s: float = Field(
        30.0,
        gt=0,
        description="Longest backoff between two intensity requests (Retry-After may ask more)",
    )
