"""A knowledge-base dataset profiled by the profiler's own code, with the options ``metatune profile``
uses (the build's slices, ``kb probe``'s whole files): one place, so both describe data alike."""

from __future__ import annotations

from pathlib import Path

from metatune.contracts import MetaFeatures
from metatune_profiler.adapters.block_pool import block_map
from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain.columns import ColumnRequest
from metatune_profiler.domain.errors import ProfileError
from metatune_profiler.domain.profile import ProfileOptions
from metatune_profiler.settings import ProfilerSettings

from .kb_file import BuildError


def profile_dataset(path: Path, base_model: str, pair: bool) -> MetaFeatures:
    """The meta-features of the dataset file ``path`` (columns ``text``, ``text_pair`` where
    ``pair``, ``label``); a :class:`BuildError` names the file where it cannot be profiled."""
    options = ProfileOptions(
        base_model=base_model,
        columns=ColumnRequest(
            text="text", text_pair="text_pair" if pair else None, label="label", task=None
        ),
    )
    try:
        result = profile_file(
            path, options, map_blocks=block_map(ProfilerSettings().profiler_workers, path)
        )
    except ProfileError as exc:
        raise BuildError(f"profiling {path.name} failed: {exc.code}: {exc.message}") from exc
    return result.features


__all__ = ["profile_dataset"]
