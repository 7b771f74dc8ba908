"""The platform's one backoff (``metatune.backoff``) and its one retry loop (``bus.retry``)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest

from metatune.backoff import MAX_DOUBLINGS, backoff_s, retry_after_s
from metatune.bus.retry import retrying
from metatune.errors import BusUnavailable


class Flaky:
    """Fails ``failures`` times with ``error``, then answers "done"; counts its calls."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


def test_backoff_doubles_from_the_first_delay_up_to_the_cap() -> None:
    assert [backoff_s(n, 0.5, 5.0) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff_s(0, 2.0) == 2.0  # attempts before the first count as the first
    assert backoff_s(11, 1.0) == 1024.0  # uncapped by default


def test_backoff_after_very_many_attempts_is_the_cap_not_an_overflow() -> None:
    assert backoff_s(5000, 0.5, 5.0) == 5.0
    assert backoff_s(10**9, 1.0) == 2.0**MAX_DOUBLINGS  # 2.0 ** 10**9 would raise OverflowError


def test_jitter_stays_in_the_upper_half_and_follows_its_source() -> None:
    delays = [backoff_s(4, 1.0, 60.0, jitter=random.Random(seed)) for seed in range(200)]
    assert all(4.0 <= d <= 8.0 for d in delays) and len(set(delays)) > 100
    assert backoff_s(4, 1.0, 6.0, jitter=random.Random(7)) == backoff_s(
        4, 1.0, 6.0, jitter=random.Random(7)
    )
    assert backoff_s(9, 1.0, 6.0, jitter=random.Random(1)) <= 6.0


def test_retry_after_in_seconds_or_an_http_date_capped() -> None:
    now = datetime(2025, 1, 1, 12, tzinfo=UTC)
    assert retry_after_s(" 120 ", now) == 120.0 and retry_after_s("120", now, cap_s=60.0) == 60.0
    assert retry_after_s("Wed, 01 Jan 2025 12:00:30 GMT", now) == 30.0
    assert retry_after_s("Wed, 01 Jan 2025 11:00:00 GMT", now) == 0.0  # already past
    assert retry_after_s(None, now) is None and retry_after_s("soon", now) is None


@pytest.mark.asyncio
async def test_retrying_waits_by_the_backoff_until_the_operation_answers() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    flaky = Flaky(5, TimeoutError("reconnecting"))
    answer = await retrying(
        flaky, what="publish", budget_s=100.0, initial_s=0.5, max_delay_s=3.0, sleep=sleep
    )
    assert (answer, flaky.calls) == ("done", 6)
    assert waits == [backoff_s(n, 0.5, 3.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.asyncio
async def test_retrying_gives_up_when_the_budget_or_the_attempts_are_spent() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    def clock() -> float:  # only the (fake) sleeps move time
        return sum(waits)

    down = Flaky(100, ConnectionError("refused"))
    with pytest.raises(BusUnavailable, match="no answer for 10 s") as raised:
        await retrying(down, what="upload", budget_s=10.0, sleep=sleep, clock=clock, max_delay_s=4)
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert waits == [0.5, 1.0, 2.0, 4.0, 2.5]  # the last wait is what the budget had left

    down = Flaky(100, ConnectionError("refused"))
    with pytest.raises(BusUnavailable, match="after 3 attempt"):
        await retrying(down, what="GET", budget_s=math.inf, attempts=3, initial_s=0.0, sleep=sleep)
    assert down.calls == 3


@pytest.mark.asyncio
async def test_retrying_honours_a_longer_wait_hint_and_passes_other_errors_at_once() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    await retrying(
        Flaky(2, TimeoutError()), what="x", budget_s=60, sleep=sleep, wait_hint=lambda _: 7.0
    )
    assert waits == [7.0, 7.0]
    broken = Flaky(1, ValueError("bad payload"))
    with pytest.raises(ValueError, match="bad payload"):
        await retrying(broken, what="x", budget_s=60, sleep=sleep)
    assert broken.calls == 1
