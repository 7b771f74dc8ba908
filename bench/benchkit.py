"""What every benchmark script shares: one JSON object on stdout, whatever the solvers print, and a
progress bar with ETA on stderr."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")


def machine() -> dict[str, Any]:
    """Where and when a run was measured: the time, the CPUs and the platform (each bench adds the
    load figure it reports)."""
    return {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def plain(value: Any) -> Any:
    """numpy scalars and arrays as JSON values (``json.dumps(default=plain)``)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def finite(value: float | None) -> float | None:
    """A figure for JSON: NaN or infinite becomes None (null), never an invalid token."""
    return None if value is None or not math.isfinite(value) else float(value)


@contextmanager
def stdout_to_stderr(enabled: bool = True) -> Iterator[None]:
    """Send everything written to stdout, by Python or by native code (HiGHS's banner), to stderr
    while the benchmark runs, so that ``--json`` can print exactly one object on the real stdout."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def print_json(report: dict) -> None:
    print(json.dumps(report, default=plain, allow_nan=False), flush=True)


def progress(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """``items``, one at a time, with a Rich progress bar (done / total, elapsed, ETA) on stderr, so
    stdout stays the table or the one JSON object. Off when stderr is not a terminal."""
    items = list(items) if total is None and not hasattr(items, "__len__") else items
    count = total if total is not None else len(items)  # type: ignore[arg-type]
    columns = (
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    console = Console(stderr=True)
    with Progress(
        *columns, console=console, transient=True, disable=not console.is_terminal
    ) as bar:
        yield from bar.track(items, total=count, description=description)
