"""Files only this process's user may read: datasets, checkpoints and downloads kept on disk.

A training set can be confidential, so the copies the services keep (the agent's dataset cache,
the profiler's downloads, objects fetched from the store) are written 0600 from the start, in
folders made 0700 (an existing one is narrowed to 0700 too).
"""

from __future__ import annotations

import io
import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner may open (made with its parents where missing)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def open_private(path: Path) -> io.BufferedWriter:
    """``path`` opened for writing (truncated), mode 0600 from its creation on."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")


__all__ = ["open_private", "private_dir"]
