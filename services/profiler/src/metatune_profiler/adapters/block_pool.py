"""Counting JSON-lines blocks in worker processes, for ``profile_file(..., map_blocks=...)``.

The profile pass is CPU-bound Python and numpy under one GIL; worker processes count blocks
(parse, split words, hash) while the main process reads the file and merges the counts in order.
Workers are spawned (never forked: the parent may hold threads and a loaded tokenizer) and
import only the pure counting code, not torch or transformers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

PARALLEL_MIN_BYTES = 64 * 1024**2  # below this, starting workers costs more than it saves
IN_FLIGHT_PER_WORKER = 2  # blocks queued per worker: bounds memory, keeps workers busy


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


class ProcessBlockMap:
    """``map(fn, items)`` in order over ``workers`` spawned processes, at most
    ``IN_FLIGHT_PER_WORKER`` items per worker in flight."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers

    def __call__(self, fn: Callable[[Item], Result], items: Iterable[Item]) -> Iterator[Result]:
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(self.workers, mp_context=context)
        pending: deque[Future[Result]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= self.workers * IN_FLIGHT_PER_WORKER:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def block_map(workers: int | None, path: Path) -> ProcessBlockMap | None:
    """Worker processes for profiling ``path`` (``workers`` None: the usable cores), or None
    (count in this process) for one worker or a file under ``PARALLEL_MIN_BYTES``."""
    count = workers or usable_cores()
    try:
        small = path.stat().st_size < PARALLEL_MIN_BYTES
    except OSError:
        small = True
    return None if count < 2 or small else ProcessBlockMap(count)
