"""Profiler-only settings (``METATUNE_PROFILER_*``); size limits come from the shared Settings."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ProfilerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="METATUNE_PROFILER_", env_file=".env", extra="ignore")

    sample_size: int = Field(4096, ge=1, description="reservoir rows behind tokenizer features")
    seed: int = Field(0, description="seed of the reservoir sample and of the padding simulation")
    mattr_window: int = Field(500, ge=1, description="tokens per MATTR window")
    max_skipped_fraction: float = Field(0.1, ge=0, le=1, description="share of bad rows that fails a file")
    path_roots: list[Path] = Field(default_factory=list,
                                   description="directories 'path' datasets must be under (empty: any)")
    allow_urls: bool = Field(True, description="accept 'url' dataset locations")
    url_timeout_s: float = Field(30.0, gt=0, description="seconds without progress before a download fails")
