"""What the intensity-source tests share: the committed provider-format fixtures, a fake clock
that the retry backoff advances instead of sleeping, and a scripted provider behind
``httpx.MockTransport`` (failures first, then answers built from the fixture's records)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from metatune_forecaster.adapters.provider_http import ProviderHttp

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "providers"
URL = "https://provider.test"

Failure = int | tuple[int, dict[str, str]] | Exception


def fixture(name: str) -> dict[str, Any]:
    """A committed fixture (``fixtures/providers/<name>.json``, see make_provider_fixtures.py)."""
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


class FakeClock:
    """Monotonic seconds that only the (fake) sleep moves; records every wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class ProviderApi:
    """Answers ``failures`` first (a status, a status with headers, or a raised transport
    error), then whatever ``answer`` builds for the request; keeps every request."""

    def __init__(
        self,
        answer: Callable[[httpx.Request], httpx.Response],
        failures: list[Failure] | None = None,
    ) -> None:
        self.answer = answer
        self.failures = list(failures or [])
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            status, headers = failure if isinstance(failure, tuple) else (failure, {})
            return httpx.Response(status, headers=headers, json={"message": "scripted failure"})
        return self.answer(request)

    def paths(self) -> list[str]:
        return [request.url.path for request in self.requests]


def http(
    api: ProviderApi,
    clock: FakeClock,
    setting: str = "METATUNE_TEST_SETTING",
    budget_s: float = 60.0,
) -> ProviderHttp:
    """A provider client on ``api`` whose backoff runs on ``clock`` (1 s doubling, 60 s budget)."""
    return ProviderHttp(
        "Provider",
        URL,
        setting,
        budget_s=budget_s,
        initial_s=1.0,
        max_delay_s=30.0,
        transport=httpx.MockTransport(api),
        sleep=clock.sleep,
        clock=clock,
    )


def hourly(
    records: list[dict[str, Any]], time_key: str, value: Callable[[dict], float]
) -> pd.Series:
    """The expected answer: each record's value by its UTC hour, mean per hour."""
    index = pd.DatetimeIndex([pd.Timestamp(r[time_key]) for r in records]).tz_convert("UTC")
    series = pd.Series([value(r) for r in records], index=index.floor("h"), dtype=float)
    return series.groupby(level=0).mean()


def between(records: list[dict[str, Any]], key: str, start: str, end: str) -> list[dict[str, Any]]:
    """The records whose ``key`` time lies in ``[start, end)``."""
    lo, hi = pd.Timestamp(start), pd.Timestamp(end)
    return [r for r in records if lo <= pd.Timestamp(r[key]) < hi]
