"""When to try a failed webhook delivery again: exponential backoff with full jitter in the upper
half (so receivers that failed together do not all retry together), or the receiver's own
``Retry-After`` (seconds or an HTTP date), both capped."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def backoff_s(attempt: int, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """Delay after failed attempt number ``attempt`` (1-based)."""
    ceiling = min(cap_s, base_s * 2.0 ** max(0, attempt - 1))
    jitter: float = (rng or random).uniform(0.5, 1.0)
    return ceiling * jitter


def retry_after_s(value: str | None, now: datetime, cap_s: float) -> float | None:
    """Seconds a ``Retry-After`` header asks for (None: absent or unreadable), at most ``cap_s``."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), cap_s)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(max(0.0, (when - now).total_seconds()), cap_s)
