"""Writer processes: more CPU cores for the event log stream.

Validating every message against its contract is the writer's main cost and runs under one GIL
per process, so with ``telemetry_writers`` > 1 the service starts that many minus one processes
that pull from the same durable consumer as its own ingestor (a consumer group: JetStream hands
each message to one of them, acks stay explicit and follow each process's own commit, so the
guarantees of one writer hold for all). Each process has its own NATS connection and PostgreSQL
pool. Rejected messages go back to the service through a queue and it publishes their error
events (its clock, its identity). A writer that dies is restarted; one whose service is gone
exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import os
import queue
import signal
from collections.abc import Awaitable, Callable
from multiprocessing.process import BaseProcess
from typing import Any

from nats.js.api import ConsumerConfig

from metatune.bus.connection import client_auth
from metatune.bus.retry import retrying
from metatune.errors import DatabaseUnavailable
from metatune.redaction import RedactingFilter
from metatune.webhook_seal import opener

from ...adapters.db import Database
from ...domain.events import Rejected
from ...settings import TelemetrySettings
from .consumer import IngestClient, StreamIngestor, consumer_config
from .writer import EventWriter, Incoming

log = logging.getLogger("metatune.telemetry.writers")
LOG_DURABLE = "telemetry-log"
RESTART_DELAY_S = 1.0
# one rejected message as it crosses the queue: stream, sequence, subject, bytes, code, reason
RejectNote = tuple[str, int, str, bytes, str, str]


def max_ack_pending(settings: TelemetrySettings) -> int:
    """Room for every writer of the log stream to hold a batch in hand and one arriving."""
    return max(1000, 2 * (settings.telemetry_writers + 1) * settings.telemetry_batch_size)


def log_consumer_config(settings: TelemetrySettings) -> ConsumerConfig:
    """The durable consumer the service and its writers share (what a benchmark may pre-create)."""
    return consumer_config(LOG_DURABLE, max_ack_pending(settings))


async def connect_ingest(settings: TelemetrySettings, name: str) -> IngestClient:
    """A NATS connection of its own for ingestion (see :class:`IngestClient`), with the service's
    credential; it reconnects for ever, as the broker's does."""
    options: dict[str, Any] = {
        "name": name,
        "connect_timeout": settings.connect_timeout_s,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 1.0,
        **client_auth(settings, settings.service_name or "telemetry"),
    }
    nc = IngestClient()
    await nc.connect(settings.nats_url, **options)
    return nc


def log_ingestor(
    nc: IngestClient,
    js: Any,
    writer: EventWriter,
    settings: TelemetrySettings,
    on_rejected: Callable[[list[tuple[Incoming, Rejected]]], Awaitable[None]] | None,
    status: dict[str, str] | None = None,
) -> StreamIngestor:
    """The ingestor of the event log stream, the same in the service and in each writer process."""
    return StreamIngestor(
        nc,
        js,
        writer,
        stream=settings.stream_name,
        durable=LOG_DURABLE,
        batch_size=settings.telemetry_batch_size,
        on_rejected=on_rejected,
        status=status,
        max_ack_pending=max_ack_pending(settings),
    )


class WriterPool:
    """``count`` writer processes, kept running until :meth:`stop`."""

    def __init__(self, settings: TelemetrySettings, schema: str | None, count: int) -> None:
        self.settings = settings
        self.schema = schema
        self.count = count
        self._context = multiprocessing.get_context("spawn")  # no inherited event loop or sockets
        self.rejects: multiprocessing.Queue[list[RejectNote]] = self._context.Queue()
        self.started = self._context.Value("i", 0)  # writers (re)started up to their first pull
        self.stored = self._context.Array("q", max(count, 1))  # new events stored, per writer
        self.processes: list[BaseProcess] = []

    def _start(self, index: int) -> BaseProcess:
        process = self._context.Process(
            target=_main,
            args=(
                self.settings,
                self.schema,
                index,
                self.rejects,
                self.started,
                self.stored,
                os.getpid(),
            ),
            name=f"telemetry-writer-{index}",
            daemon=True,
        )
        process.start()
        return process

    async def run(self, on_rejected: Callable[[list[RejectNote]], Awaitable[None]]) -> None:
        """Start the writers, restart any that exits, and relay their rejected messages."""
        self.processes = [self._start(i + 1) for i in range(self.count)]
        log.info("telemetry: %d writer process(es) beside the service", self.count)
        try:
            while True:
                for i, process in enumerate(self.processes):
                    if not process.is_alive():
                        log.warning(
                            "telemetry writer %s exited with %s; restarting",
                            process.name,
                            process.exitcode,
                        )
                        await asyncio.sleep(RESTART_DELAY_S)
                        self.processes[i] = self._start(i + 1)
                with contextlib.suppress(queue.Empty):
                    notes = await asyncio.to_thread(self.rejects.get, True, 0.5)
                    await on_rejected(notes)
        finally:
            self.terminate()
            await asyncio.to_thread(self.join)

    def terminate(self) -> None:
        """SIGTERM: a writer drops the batch in hand (un-acked, so redelivered) and exits."""
        for process in self.processes:
            if process.is_alive():
                process.terminate()

    def join(self) -> None:
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join(1)


def _main(
    settings: TelemetrySettings,
    schema: str | None,
    index: int,
    rejects: multiprocessing.Queue,
    started: Any,
    stored: Any,
    parent: int,
) -> None:
    logging.basicConfig(
        level=os.environ.get("METATUNE_LOG_LEVEL", "INFO"),
        format=f"%(asctime)s %(levelname)s %(name)s[writer {index}]: %(message)s",
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
    with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
        asyncio.run(_serve(settings, schema, index, rejects, started, stored, parent))


async def _serve(
    settings: TelemetrySettings,
    schema: str | None,
    index: int,
    rejects: multiprocessing.Queue,
    started: Any,
    stored: Any,
    parent: int,
) -> None:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    nc = await connect_ingest(settings, f"{settings.service_name or 'telemetry'}-writer")
    db = Database(
        settings.database_url,
        schema=schema,
        max_size=2,
        connect_timeout_s=settings.connect_timeout_s,
    )

    async def relay(rejected: list[tuple[Incoming, Rejected]]) -> None:
        rejects.put([(m.stream, m.seq, m.subject, m.data, r.code, r.reason) for m, r in rejected])

    try:
        await retrying(  # the service migrated before starting us; PostgreSQL may be restarting
            db.load_mode,
            what="telemetry writer: reading the storage mode",
            budget_s=math.inf,
            initial_s=0.5,
            max_delay_s=5.0,
            transient=(DatabaseUnavailable,),
        )
        writer = EventWriter(db, opener(settings), concurrent=True)  # one of several
        ingestor = log_ingestor(nc, nc.jetstream(), writer, settings, relay)
        base = stored[index - 1]  # a restarted writer adds to what its predecessor stored

        async def report() -> None:  # until the service is gone
            await ingestor.pulling.wait()
            with started.get_lock():
                started.value += 1
            while os.getppid() == parent:
                stored[index - 1] = base + ingestor.stored
                await asyncio.sleep(0.5)
            log.warning("the telemetry service is gone; this writer stops")

        tasks = {asyncio.ensure_future(ingestor.run()), asyncio.ensure_future(report())}
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                finished.result()
        finally:
            for pending in tasks:
                pending.cancel()
            await asyncio.wait(tasks, timeout=5.0)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()
        await db.close()
