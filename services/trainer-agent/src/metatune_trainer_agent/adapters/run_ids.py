"""The agent's secret key for its run outcomes' ``Nats-Msg-Id`` (:func:`metatune.msgids.sealed`).

JetStream keeps one message per id in its de-duplication window, whoever published it, and every
agent may publish run events under its own subject and read every job and assignment id. An id a
peer can compute lets it publish first and have the genuine completion dropped as a copy; an id
sealed with a key only this agent holds cannot be taken first. The key is 32 random bytes made
once and kept (0600) in the agent's private data folder, so the agent's retries and the agent
restarted derive the same id for the same run, and JetStream still stores it once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from metatune.private_files import open_private, private_dir

KEY_BYTES = 32


def run_key(folder: Path, datacenter: str) -> bytes:
    """``datacenter``'s key, kept in ``folder`` (made on first use)."""
    path = private_dir(folder) / f"run-ids.{datacenter}.key"
    if not path.exists():
        _create(path)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise ValueError(f"{path} is not a run-id key ({len(key)} bytes, not {KEY_BYTES})")
    return key


def _create(path: Path) -> None:
    """Write a new key whole, then link it in: a process starting at the same time that made one
    first keeps its own, and both read the same."""
    draft = path.with_name(f"{path.name}.{os.getpid()}.draft")
    with open_private(draft) as out:
        out.write(secrets.token_bytes(KEY_BYTES))
    try:
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink()
