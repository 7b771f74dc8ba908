"""The tokenization cache: a dataset is tokenized once, its encoded splits kept on disk under
:func:`~..domain.encoding.cache_key`, so a re-run (another trial, a resumed job) reads tensors
instead of tokenizing again, and any change that would alter the tensors misses the cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..domain.encoding import (
    CACHE_FORMAT,
    EncodedDataset,
    cache_key,
    cap_training_rows,
    dataset_from_state,
    dataset_state,
    encoded_dataset,
)
from ..domain.request import TrainingRequest
from .dataset_files import load_examples

log = logging.getLogger("metatune.agent")


def encode_dataset(request: TrainingRequest, tokenizer: Any) -> EncodedDataset:
    """Encoded splits for ``request`` (from the cache when it holds them), the training split cut
    to the budget's ``max_train_rows``."""
    return cap_training_rows(_encoded(request, tokenizer), request.config.max_train_rows)


def _encoded(request: TrainingRequest, tokenizer: Any) -> EncodedDataset:
    cache_path = _cache_path(request, tokenizer)
    if cache_path is not None and cache_path.is_file():
        try:
            state = torch.load(cache_path, weights_only=True)
            if state.get("format") == CACHE_FORMAT:
                return dataset_from_state(state, cache_hit=True)
        except Exception:  # a truncated or foreign file is rebuilt, never trusted
            cache_path.unlink(missing_ok=True)
    examples = load_examples(
        request.dataset,
        request.task,
        fmt=request.dataset_format,
        text_column=request.text_column,
        text_pair_column=request.text_pair_column,
        label_column=request.label_column,
    )
    dataset = encoded_dataset(examples, tokenizer, request)
    if cache_path is not None:
        try:
            _save(cache_path, dataset)
        except (
            OSError
        ) as exc:  # the cache only saves time: a full or read-only disk must not fail the run
            log.warning("tokenization cache not written (%s): %s", cache_path, exc)
    return dataset


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _cache_path(request: TrainingRequest, tokenizer: Any) -> Path | None:
    cache_dir = request.options.cache_dir
    if cache_dir is None or not request.dataset.is_file():
        return None
    name = cache_key(request, tokenizer, file_sha256(request.dataset))
    return Path(cache_dir) / f"{name}.pt"


def _save(path: Path, dataset: EncodedDataset) -> None:
    """Write ``path`` atomically. The temporary file is unique per call, not per process: an agent
    encodes the trials of one study in parallel threads, which write the same entry at once
    (measured in the demo: a name per process made one thread's rename fail the other's run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    torch.save(dataset_state(dataset), tmp)
    try:
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    finally:
        tmp.unlink(missing_ok=True)
