"""A pool's worker started with ``die_with_parent`` ends when its parent is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PARENT = textwrap.dedent(
    """
    import multiprocessing, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from metatune.processes import die_with_parent

    def pid():
        return os.getpid()

    def sleep():
        time.sleep(600)

    if __name__ == "__main__":
        context = multiprocessing.get_context("spawn")
        initializer = die_with_parent if sys.argv[1] == "on" else None
        pool = ProcessPoolExecutor(1, mp_context=context, initializer=initializer)
        print(pool.submit(pid).result(), flush=True)
        pool.submit(sleep)
        time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"


def _worker_after_parent_killed(tmp_path: Path, mode: str) -> int:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen(
        [sys.executable, str(script), mode], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait(30)
    return worker


def test_a_worker_ends_with_its_killed_parent_and_without_it_would_not(tmp_path: Path) -> None:
    worker = _worker_after_parent_killed(tmp_path, "on")
    deadline = time.monotonic() + 30
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)
    orphan = _worker_after_parent_killed(tmp_path, "off")  # the pool alone leaves it running
    try:
        time.sleep(1)
        assert _alive(orphan)
    finally:
        os.kill(orphan, signal.SIGKILL)
