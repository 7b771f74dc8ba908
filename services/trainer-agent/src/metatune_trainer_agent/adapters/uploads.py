"""Bus writes of a running job that must survive an outage without holding up training.

Checkpoints are uploaded in the background, latest wins: while NATS is down the training thread
keeps going, each new checkpoint replaces the one still waiting, and the upload is retried with
backoff (:func:`metatune.bus.retry.retrying`) until the bus answers. Results (adapter, completion,
pause, failure) are retried the same way before the run's message is acknowledged.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from metatune.bus.retry import retrying

from ..settings import AgentSettings

T = TypeVar("T")
log = logging.getLogger("metatune.agent.uploads")


async def with_retries(
    settings: AgentSettings, what: str, operation: Callable[[], Awaitable[T]]
) -> T:
    return await retrying(
        operation,
        what=what,
        budget_s=settings.bus_retry_budget_s,
        initial_s=settings.bus_retry_initial_s,
        max_delay_s=settings.bus_retry_max_s,
    )


class LatestUploader:
    """One job's checkpoint uploads, run on the event loop; :meth:`offer` is called there."""

    def __init__(
        self, upload: Callable[[bytes], Awaitable[None]], settings: AgentSettings, what: str
    ) -> None:
        self._upload = upload
        self._settings = settings
        self._what = what
        self._pending: tuple[int, bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self.uploaded_step: int | None = None
        self.error: BaseException | None = None

    def offer(self, step: int, data: bytes) -> None:
        if self._pending is not None:
            log.info(
                "%s: checkpoint at step %d replaces step %d still waiting for the bus",
                self._what,
                step,
                self._pending[0],
            )
        self._pending = (step, data)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name=f"upload-{self._what}")

    async def _drain(self) -> None:
        while self._pending is not None:
            step, data = self._pending
            self._pending = None
            try:
                await with_retries(
                    self._settings,
                    f"{self._what} checkpoint upload",
                    functools.partial(self._upload, data),
                )
            except Exception as exc:  # the budget ran out: the next checkpoint (or outcome) retries
                self.error = exc
                log.warning("%s: checkpoint at step %d not uploaded: %r", self._what, step, exc)
                continue
            self.uploaded_step = step
            log.info("%s: checkpoint at step %d uploaded (%d bytes)", self._what, step, len(data))

    async def flush(self) -> None:
        """Wait until nothing is pending (before a newer checkpoint is written directly)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
