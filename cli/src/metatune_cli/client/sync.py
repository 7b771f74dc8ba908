"""The synchronous client: :class:`AsyncClient`'s methods, blocking.

Its coroutines run on an event loop of its own, in a thread of its own, so the connections it
keeps live on one loop from call to call, and it works where a loop already runs (a notebook).
Callbacks and iteration (:meth:`Client.progress`, :meth:`Client.wait`) happen in the caller's
thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from uuid import UUID

from metatune.settings import Settings

from .aio import CANCEL_REASON, POLL_S, AsyncClient
from .models import (
    AdapterDownload,
    Cancellation,
    Progress,
    Receipt,
    StudyCancellation,
    StudyDetail,
    StudySummary,
    TrialResult,
)
from .submission import Draft

T = TypeVar("T")


class Client:
    """``with Client() as client: receipt = client.submit("examples/study.yaml")``."""

    def __init__(self, settings: Settings | None = None, *, poll_s: float = POLL_S) -> None:
        self._async = AsyncClient(settings, poll_s=poll_s)
        self.settings = self._async.settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="metatune-client", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the client's loop (idempotent)."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._async.aclose())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("the client is closed")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:  # Ctrl-C included: what runs on the loop stops too
            future.cancel()
            raise

    def submit(
        self,
        source: Path | str | None = None,
        *,
        object_key: str | None = None,
        allow_dataset_outside: bool = False,
        **options: Any,
    ) -> Receipt:
        """See :meth:`AsyncClient.submit`."""
        return self._run(
            self._async.submit(
                source,
                object_key=object_key,
                allow_dataset_outside=allow_dataset_outside,
                **options,
            )
        )

    def submit_draft(self, checked: Draft) -> Receipt:
        return self._run(self._async.submit_draft(checked))

    def study_id(self, study: UUID | str) -> UUID:
        """See :meth:`AsyncClient.study_id`."""
        return self._run(self._async.study_id(study))

    def studies(self, tags: Iterable[str] = ()) -> list[StudySummary]:
        return self._run(self._async.studies(tags))

    def study(self, study: UUID | str) -> StudyDetail:
        return self._run(self._async.study(study))

    def results(self, study: UUID | str) -> list[TrialResult]:
        return self._run(self._async.results(study))

    def progress(
        self, study_id: UUID | str, *, timeout_s: float | None = None
    ) -> Iterator[Progress]:
        """See :meth:`AsyncClient.progress`; each update is read when the loop asks for it."""
        updates = self._async.progress(study_id, timeout_s=timeout_s)
        try:
            while True:
                try:
                    yield self._run(_next(updates))
                except StopAsyncIteration:
                    return
        finally:
            if not self._loop.is_closed():
                self._run(updates.aclose())

    def wait(
        self,
        study_id: UUID | str,
        *,
        timeout_s: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> StudyDetail:
        """See :meth:`AsyncClient.wait`; ``on_progress`` is called in this thread."""
        for update in self.progress(study_id, timeout_s=timeout_s):
            if on_progress is not None:
                on_progress(update)
        return self.study(update.study_id)

    def cancel(self, job: UUID | str, reason: str = CANCEL_REASON) -> Cancellation:
        return self._run(self._async.cancel(job, reason))

    def cancel_study(self, study: UUID | str, reason: str = CANCEL_REASON) -> StudyCancellation:
        return self._run(self._async.cancel_study(study, reason))

    def download_adapter(self, job: UUID | str, out: Path | str) -> AdapterDownload:
        return self._run(self._async.download_adapter(job, out))


async def _next(updates: AsyncGenerator[Progress, None]) -> Progress:
    return await anext(updates)
