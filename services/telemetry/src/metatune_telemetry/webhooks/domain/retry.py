"""When to try a failed webhook delivery again. The outbox keeps the answer in the row's
``next_attempt_at``, so this is a schedule of attempts, not a retry loop: the receiver's own
``Retry-After`` if it sent one (read and capped by :func:`metatune.backoff.retry_after_s`), else
the platform's exponential backoff jittered into the upper half, so that receivers that failed
together do not all retry together."""

from __future__ import annotations

import random

from metatune.backoff import backoff_s


def next_attempt_in_s(
    attempt: int, retry_after_s: float | None, base_s: float, cap_s: float, rng: random.Random
) -> float:
    """Seconds until the attempt after failed attempt number ``attempt`` (1-based)."""
    if retry_after_s is not None:
        return retry_after_s
    return backoff_s(attempt, base_s, cap_s, jitter=rng)
