"""How long to wait before trying again: the platform's one exponential backoff.

:func:`backoff_s` is the formula (doubling from ``initial_s``, capped at ``max_s``, optionally
jittered into the upper half so that clients that failed together do not retry together);
:func:`retry_after_s` reads a server's ``Retry-After``. Both are pure, so every kind of retry
computes its waits here: the in-process loop :func:`metatune.bus.retry.retrying`, JetStream
redelivery delays (:mod:`metatune.bus.middleware`) and schedules kept in a database (the webhook
outbox's ``next_attempt_at``).
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# 2.0 ** 1024 overflows a float; a delay that has doubled this often is capped long before.
MAX_DOUBLINGS = 1000


def backoff_s(
    attempt: int,
    initial_s: float,
    max_s: float = math.inf,
    *,
    jitter: random.Random | None = None,
) -> float:
    """Wait after failed attempt number ``attempt`` (1-based): ``initial_s * 2 ** (attempt - 1)``,
    at most ``max_s``; with a ``jitter`` source, scaled by a uniform factor in [0.5, 1]."""
    doublings = min(max(0, attempt - 1), MAX_DOUBLINGS)
    delay = min(max_s, initial_s * 2.0**doublings)
    return delay * jitter.uniform(0.5, 1.0) if jitter is not None else delay


def retry_after_s(
    value: str | None, now: datetime | None = None, cap_s: float = math.inf
) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta seconds or an HTTP date, counted from
    ``now``, default the current time), at most ``cap_s``; None if absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), cap_s)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(max(0.0, (when - (now or datetime.now(UTC))).total_seconds()), cap_s)
