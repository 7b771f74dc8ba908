"""A durable JetStream pull consumer that stores batches and acks only what is stored.

Unlike the one-message handlers of :class:`metatune.service.Service`, telemetry fetches up to
``telemetry_batch_size`` messages and stores them in one COPY transaction. ``max_deliver`` is
unlimited: while PostgreSQL is down the batch is held un-acked (``in_progress`` keeps JetStream
from redelivering it meanwhile), the writer retries with backoff, and the consumer catches up
when the database returns. Nothing is acked before it is committed; a crash between commit
and ack means a redelivery, which the writer stores once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import nats.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from metatune.errors import DatabaseUnavailable

from ..domain.events import Rejected
from .writer import EventWriter, Incoming, WriteResult

log = logging.getLogger("metatune.telemetry.ingest")
ACK_WAIT_S = 60.0


class StreamIngestor:
    def __init__(
        self,
        js: JetStreamContext,
        writer: EventWriter,
        *,
        stream: str,
        durable: str,
        batch_size: int,
        on_rejected: Callable[[list[tuple[Incoming, Rejected]]], Awaitable[None]] | None = None,
        status: dict[str, str] | None = None,
    ) -> None:
        self.js = js
        self.writer = writer
        self.stream = stream
        self.durable = durable
        self.batch_size = batch_size
        self.on_rejected = on_rejected
        self.status = status if status is not None else {}
        self.stored = 0

    async def run(self) -> None:
        sub = await self.js.pull_subscribe(
            "metatune.>",
            durable=self.durable,
            stream=self.stream,
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,
                max_deliver=-1,
                ack_wait=ACK_WAIT_S,
                max_ack_pending=max(1000, 4 * self.batch_size),
            ),
        )
        try:
            while True:
                try:
                    msgs = await sub.fetch(self.batch_size, timeout=1.0)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                batch = [
                    Incoming(self.stream, m.metadata.sequence.stream, m.subject, m.data)
                    for m in msgs
                ]
                result = await self._store(batch, msgs)
                for m in msgs:
                    await m.ack()
                self.stored += result.stored
                if result.rejected and self.on_rejected is not None:
                    await self.on_rejected(result.rejected)
        finally:  # a pending pull request would hold the broker's drain at shutdown
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _store(self, batch: list[Incoming], msgs: list) -> WriteResult:
        delay = 0.5
        while True:
            try:
                result = await self.writer.write(batch)
                if self.status.get("database") != "ok":
                    self.status["database"] = "ok"
                return result
            except DatabaseUnavailable as exc:
                if self.status.get("database") != "unavailable":
                    log.warning(
                        "%s: PostgreSQL unavailable, holding %d message(s) un-acked: %s",
                        self.stream,
                        len(batch),
                        exc,
                    )
                self.status["database"] = "unavailable"
                for m in msgs:
                    await m.in_progress()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
