"""The settings of the profiler, over the platform's (:class:`metatune.settings.Settings`):
the same ``METATUNE_*`` environment variables, the same ``.env``; the README's configuration
table lists them under their service."""

from __future__ import annotations

from pydantic import Field

from metatune.settings import Settings


class ProfilerSettings(Settings):
    """The profiler's own."""

    profiler_sample_size: int = Field(
        4096, ge=1, description="Reservoir rows behind tokenizer features"
    )
    profiler_seed: int = Field(
        0, description="Seed of the reservoir sample and of the padding simulation"
    )
    profiler_mattr_window: int = Field(500, ge=1, description="Tokens per MATTR window")
    profiler_max_skipped_fraction: float = Field(
        0.1, ge=0, le=1, description="Share of bad rows that fails a file"
    )
    profiler_workers: int | None = Field(
        None,
        ge=1,
        description="Processes counting a JSON-lines file's blocks (unset: the cores the process "
        "may use; 1: none, files under 64 MiB: none)",
    )
