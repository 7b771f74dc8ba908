"""What every benchmark script shares: one JSON object on stdout, whatever the solvers print."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


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
