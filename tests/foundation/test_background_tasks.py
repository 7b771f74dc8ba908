"""A service's background loop that meets a bus not answering in time (a NATS timeout at start,
under load) says so in one warning line and runs again; any other failure keeps its traceback."""

from __future__ import annotations

import logging

import nats.errors
import pytest

from metatune.service import Service
from metatune.settings import Settings


@pytest.mark.parametrize(
    ("error", "level", "traceback"),
    [
        (nats.errors.TimeoutError(), logging.WARNING, False),
        (ValueError("bug"), logging.ERROR, True),
    ],
    ids=["bus-timeout", "bug"],
)
async def test_a_failed_background_loop_is_logged_once_and_run_again(
    caplog: pytest.LogCaptureFixture, error: Exception, level: int, traceback: bool
) -> None:
    service = Service("quiet", settings=Settings())
    calls: list[int] = []

    async def loop() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise error

    caplog.set_level(logging.DEBUG, logger="metatune")
    await service._supervised(loop)

    assert len(calls) == 2  # run again after the failure
    records = [r for r in caplog.records if "background task loop" in r.getMessage()]
    assert [(r.levelno, r.exc_info is not None) for r in records] == [(level, traceback)]
