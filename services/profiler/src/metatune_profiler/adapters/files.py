"""The profiler on a dataset file: open it (:class:`.reader.Dataset`), load the base model's
tokenizer (:func:`.tokenizer.load_tokenizer`) and the probe's encoder and hand them to the pure
:func:`~..domain.profile.profile_rows`; or check a submission against its file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..domain.errors import ProfileError
from ..domain.profile import BlockMap, ProfileOptions, ProfileResult, profile_rows
from ..domain.rows import ReadLimits
from ..domain.validate import problem
from .encoder import ModelEncoder
from .reader import Dataset
from .tokenizer import load_tokenizer


def open_dataset(path: str | Path, options: ProfileOptions) -> Dataset:
    return Dataset(
        Path(path),
        options.columns,
        ReadLimits(options.max_file_bytes, options.max_row_bytes),
        options.format,
    )


def profile_file(
    path: str | Path,
    options: ProfileOptions | None = None,
    on_rows: Callable[[int], None] | None = None,
    map_blocks: BlockMap | None = None,
) -> ProfileResult:
    """Profile one dataset file; raises a :class:`~..domain.errors.ProfileError` subclass when it
    is unusable.

    ``on_rows(n)`` is told the rows read so far every few thousand rows (a CLI's progress bar).
    With ``map_blocks``, the blocks of a JSON-lines file are counted by it (e.g. in other
    processes) and merged in order: the same profile as without."""
    return _profile(path, options, on_rows, batched=True, map_blocks=map_blocks)


def profile_file_by_rows(
    path: str | Path,
    options: ProfileOptions | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> ProfileResult:
    """:func:`profile_file` computed one row at a time with word strings: the reference."""
    return _profile(path, options, on_rows, batched=False)


def _profile(
    path: str | Path,
    options: ProfileOptions | None,
    on_rows: Callable[[int], None] | None,
    *,
    batched: bool,
    map_blocks: BlockMap | None = None,
) -> ProfileResult:
    options = options or ProfileOptions()
    tokenizer = load_tokenizer(options.base_model)  # fail fast on an unknown model, before reading
    dataset = open_dataset(path, options)
    encoder = ModelEncoder(options.base_model)  # loads the model only if the probe runs
    return profile_rows(
        dataset,
        tokenizer,
        options,
        on_rows,
        encoder=encoder,
        batched=batched,
        map_blocks=map_blocks,
    )


def check_dataset(path: Path, options: ProfileOptions) -> list[str]:
    """What profiling ``path`` with ``options`` would refuse at the start (empty: nothing)."""
    try:
        open_dataset(path, options)
    except ProfileError as exc:
        return [problem(exc)]
    return []
