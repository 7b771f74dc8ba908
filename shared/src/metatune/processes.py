"""Worker processes that end with the process that started them.

A pool's workers (``concurrent.futures.ProcessPoolExecutor`` with the spawn context) outlive a
parent killed by a signal: they go on with the tasks already queued to them, whose results no one
will read, and hold the cores a restarted parent needs. :func:`die_with_parent`, run first in the
worker (a pool's ``initializer``), asks Linux to send it SIGKILL when its parent goes, however
the parent goes (even SIGKILL, which no handler sees); elsewhere it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    """In a worker process: be killed when the parent process exits (Linux; a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


__all__ = ["die_with_parent"]
