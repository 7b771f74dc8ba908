"""The runtime every MetaTune service is built on: one FastStream app over NATS JetStream.

A service declares typed handlers; the runtime gives each a durable pull consumer with explicit
acks and a bounded ``max_deliver``, turns invalid payloads into error events (see
:mod:`metatune.bus.middleware`), publishes with de-duplication, keeps a health heartbeat in KV,
and provides the shared clock, the object store and hourly ticks::

    service = Service("profiler")


    @service.consume(subjects.DATASETS_SUBMITTED, durable="profiler")
    async def on_submitted(event: DatasetSubmitted) -> None:
        await service.publish(subjects.DATASETS_PROFILED, profiled)


    if __name__ == "__main__":
        service.run()
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

from faststream import FastStream
from faststream.middlewares import AckPolicy
from faststream.nats import ConsumerConfig, DeliverPolicy, JStream, NatsBroker, PullSub
from faststream.nats.annotations import NatsMessage
from faststream.nats.security import NatsSecurity
from nats.aio.client import Client
from nats.errors import ConnectionReconnectingError, NoRespondersError
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy as JsAckPolicy
from typing_extensions import TypeVar as TypeVarWithDefault

from . import __version__, msgids, subjects
from .bus import ObjectStore, ensure_streams, publish_event, stream_for
from .bus.clock import load_clock
from .bus.connection import client_auth
from .bus.keepalive import while_working
from .bus.middleware import contract_middleware
from .bus.streams import HEALTH_BUCKET
from .clock import HOUR, Clock, RealClock
from .contracts import ClockTick, ErrorEvent, ErrorKind, Event, ServiceHealth
from .errors import ConfigurationError
from .redaction import RedactingFilter, redact, redact_url
from .settings import Settings, get_settings

Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])
# what a service's handlers call into (the scheduler's Runtime, an agent's TrainerAgent, the
# profiler's Profiler...): set once by its create_service; a bare ``Service`` (tests, tools)
# leaves it open
RuntimeT = TypeVarWithDefault("RuntimeT", default=Any)
log = logging.getLogger("metatune.service")
# a bus that did not answer in time or is reconnecting: a background loop retries, one line logged
BUS_SLOW = (NatsTimeoutError, NoRespondersError, ConnectionReconnectingError)


class Service(Generic[RuntimeT]):
    def __init__(
        self, name: str, *, instance: str | None = None, settings: Settings | None = None
    ) -> None:
        self.name = subjects.token(name)
        self.settings = settings or get_settings()
        self._runtime: RuntimeT | None = None
        self.instance = instance or self.settings.service_name or name
        auth = client_auth(self.settings, self.instance)
        tls = auth.pop("tls", None)  # FastStream takes the TLS context as its security option
        # pull consumers take their inbox prefix apart from the connection's (the user's permissions allow only its own)
        self._inbox_prefix = (auth.get("inbox_prefix", "_INBOX") + ".").encode()
        # called when this process's connection drops / comes back (on_connection_change)
        self._connection_handlers: list[tuple[Callable[[], Awaitable[None]], bool]] = []
        self.broker = NatsBroker(
            self.settings.nats_url,
            middlewares=[contract_middleware(self.settings, self.report_error)],
            # FastStream annotates int; nats-py takes any number of seconds
            connect_timeout=self.settings.connect_timeout_s,  # type: ignore[arg-type]
            max_reconnect_attempts=-1,  # ride out any outage (nats-py gives up after 60 tries by default)
            reconnect_time_wait=1,
            log_level=logging.DEBUG,  # per-message "Received/Processed" lines only at DEBUG
            security=NatsSecurity(ssl_context=tls) if tls else None,
            disconnected_cb=self._disconnected,
            reconnected_cb=self._reconnected,
            **auth,
        )
        self.app = FastStream(self.broker)
        self.app.on_startup(self._ensure_layout)
        self.app.after_startup(self._start_tasks)
        self.app.on_shutdown(self._stop_tasks)
        self.clock: Clock = RealClock()
        self.objects: ObjectStore | None = None
        self.started_at = time.time()
        self.status_details: dict[str, str] = {}
        self.health_status = (
            "ok"  # what `metatune status` calls healthy; a service may say otherwise
        )
        self._background: list[Callable[[], Awaitable[None]]] = [self._heartbeat, self._ticker]
        self._tick_handlers: list[Callable[[ClockTick], Awaitable[None]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._last_tick: datetime | None = None
        self._js: tuple[Client, JetStreamContext] | None = None  # see js
        self.durables: list[
            tuple[str, str, str]
        ] = []  # (stream, durable, subject): what its NATS user must be granted

    @property
    def runtime(self) -> RuntimeT:
        """The adapter this service's handlers call into, which tests, benches and tools read."""
        if self._runtime is None:
            raise ConfigurationError(
                f"service {self.name} has no runtime: its create_service sets one"
            )
        return self._runtime

    @runtime.setter
    def runtime(self, runtime: RuntimeT) -> None:
        self._runtime = runtime

    # ----------------------------------------------------------------- declaring handlers
    def consume(
        self, subject: str, durable: str, *, description: str | None = None
    ) -> Callable[[Handler], Handler]:
        """Durable pull consumer on ``subject`` for a typed handler (one per service and subject)."""

        stream = stream_for(subject, self.settings)
        self.durables.append((stream, subjects.token(durable), subject))

        def decorator(func: Handler) -> Handler:
            subscriber = self.broker.subscriber(
                subject,
                stream=JStream(stream, declare=False),
                durable=subjects.token(durable),
                pull_sub=PullSub(batch_size=1, timeout=1.0),
                inbox_prefix=self._inbox_prefix,
                config=ConsumerConfig(
                    ack_policy=JsAckPolicy.EXPLICIT,
                    max_deliver=self.settings.max_deliver,
                    ack_wait=self.settings.ack_wait_s,
                ),
                ack_policy=AckPolicy.MANUAL,
                description=description or (func.__doc__ or "").strip() or None,
            )
            subscriber(func)  # registered; the handler itself stays a plain coroutine function
            return func

        return decorator

    def on_tick(
        self, func: Callable[[ClockTick], Awaitable[None]]
    ) -> Callable[[ClockTick], Awaitable[None]]:
        """Call ``func`` at each new (simulated or real) hour. A handler that runs longer than
        ``ack_wait_s`` keeps its tick (in-progress acks), so it is not delivered again meanwhile;
        one that raises is retried up to ``max_deliver`` times, then dead-lettered."""
        if not self._tick_handlers:

            @self.broker.subscriber(
                subjects.CLOCK_TICK,
                stream=JStream(self.settings.status_stream_name, declare=False),
                deliver_policy=DeliverPolicy.NEW,
                ack_policy=AckPolicy.MANUAL,
                config=ConsumerConfig(
                    max_deliver=self.settings.max_deliver, ack_wait=self.settings.ack_wait_s
                ),
                include_in_schema=False,
            )
            async def _dispatch(tick: ClockTick, message: NatsMessage) -> None:
                for handler in self._tick_handlers:
                    await while_working(message, handler(tick), self.settings.ack_wait_s / 3)

        self._tick_handlers.append(func)
        return func

    def on_connection_change(
        self, *, down: Callable[[], Awaitable[None]], up: Callable[[], Awaitable[None]]
    ) -> None:
        """Call ``down`` when this process's NATS connection drops and ``up`` when it is back
        (nats-py's disconnected / reconnected callbacks): what a service that judges others by
        their silence needs to tell its own disconnection from theirs."""
        self._connection_handlers += [(down, False), (up, True)]

    async def _disconnected(self) -> None:
        for handler, up in self._connection_handlers:
            if not up:
                await handler()

    async def _reconnected(self) -> None:
        for handler, up in self._connection_handlers:
            if up:
                await handler()

    def background(self, func: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """Run ``func`` as a task for the life of the app (cancelled on shutdown)."""
        self._background.append(func)
        return func

    # ----------------------------------------------------------------- using the bus
    async def publish(self, subject: str, event: Event, *, msg_id: str | None = None) -> None:
        await publish_event(self.broker, subject, event, self.settings, msg_id=msg_id)

    async def report_error(
        self,
        *,
        code: str,
        message: str,
        kind: ErrorKind = ErrorKind.bad_input,
        subject: str | None = None,
        correlation_id: str | UUID | None = None,
        row: int | None = None,
        payload_excerpt: str | None = None,
        deliveries: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> ErrorEvent:
        """Publish a typed error on ``metatune.errors.<service>`` so the submitter learns what was wrong."""
        event = ErrorEvent(
            occurred_at=self.clock.now(),
            service=self.name,
            kind=kind,
            code=code,
            message=redact(message),
            subject=subject,
            correlation_id=str(correlation_id) if correlation_id else None,
            row=row,
            payload_excerpt=redact(payload_excerpt) if payload_excerpt else None,
            deliveries=deliveries,
            details=details or {},
        )
        log.warning("%s error %s: %s", self.name, code, message)
        await self.publish(subjects.errors(self.name), event)
        return event

    async def reaches_bus(self, timeout_s: float) -> bool:
        """Whether a round trip of this process's own through the server (JetStream's account
        info) is answered within ``timeout_s``: not while the server is frozen or out of reach,
        which the connection itself may take minutes to notice."""
        try:
            await self.broker.connection.jetstream(timeout=timeout_s).account_info()
        except (NatsError, TimeoutError):
            return False
        return True

    @property
    def js(self) -> JetStreamContext:
        """JetStream over the broker's connection (FastStream's public ``broker.connection``), one
        context per connection: a reconnect keeps the connection, a restart of the broker not."""
        nc = self.broker.connection
        if self._js is None or self._js[0] is not nc:
            self._js = (nc, nc.jetstream())
        return self._js[1]

    # ----------------------------------------------------------------- lifecycle
    async def _ensure_layout(self) -> None:
        await self.broker.connect()
        await ensure_streams(self.js, self.settings)
        self.clock = await load_clock(self.js, self.settings)
        self.objects = ObjectStore(self.js)

    async def _start_tasks(self) -> None:
        for func in self._background:
            self._tasks.append(asyncio.create_task(self._supervised(func), name=func.__name__))

    async def _stop_tasks(self) -> None:
        """Cancel the background loops, again each second until they end: on Python 3.11 a
        cancellation that lands as an inner ``asyncio.wait_for`` (nats-py's requests) completes is
        swallowed (python/cpython#86296, fixed in 3.12), and the loop sleeps on (seen: shutdown hung
        on the heartbeat under CPU load)."""
        pending = set(self._tasks)
        while pending:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=1.0)
        self._tasks.clear()
        try:
            kv = await self.js.key_value(HEALTH_BUCKET)
            await kv.delete(self.instance)
        except Exception:  # best effort: the TTL removes it anyway
            pass

    async def _supervised(self, func: Callable[[], Awaitable[None]]) -> None:
        """Keep a background loop alive: log and restart it if it raises."""
        while True:
            try:
                await func()
                return
            except asyncio.CancelledError:
                raise
            except BUS_SLOW as exc:  # at start or under load: one line, not a traceback
                log.warning(
                    "background task %s: the bus did not answer (%s); restarting in 1 s",
                    func.__name__,
                    type(exc).__name__,
                )
                await asyncio.sleep(1.0)
            except Exception:
                log.exception("background task %s failed; restarting in 1 s", func.__name__)
                await asyncio.sleep(1.0)

    async def _heartbeat(self) -> None:
        kv = await self.js.key_value(HEALTH_BUCKET)
        while True:
            health = ServiceHealth(
                service=self.name,
                instance=self.instance,
                pid=os.getpid(),
                host=socket.gethostname(),
                version=__version__,
                started_at=self.started_at,
                heartbeat_at=time.time(),
                status=self.health_status,
                details=self.status_details,
            )
            await kv.put(self.instance, health.model_dump_json().encode())
            await asyncio.sleep(self.settings.heartbeat_s)

    async def _ticker(self) -> None:
        """Publish the tick of each new hour (de-duplicated across all services). A process that
        falls behind (a loaded machine, a fast simulated clock) catches up hour by hour, so
        consumers never see a skipped hour."""
        if (
            self._last_tick is None
        ):  # kept across restarts of this loop, so a failed publish is retried
            self._last_tick = self.clock.current_hour()
        while True:
            hour = self._last_tick + HOUR
            await self.clock.sleep_until(hour)
            tick = ClockTick(
                occurred_at=self.clock.now(), hour=hour, simulated=self.clock.simulated
            )
            await self.publish(subjects.CLOCK_TICK, tick, msg_id=msgids.tick(hour))
            self._last_tick = hour

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Service]:
        """Run the service inside another program (tests, notebooks) until the block exits."""
        await self.app.start()
        try:
            yield self
        finally:
            await self.stop()

    async def stop(self) -> bool:
        """Stop consumers and background tasks, drain and close the connection, within
        ``shutdown_timeout_s``; False when it did not finish. A shutdown that does not finish is
        abandoned with an error log that shows where every task waits: a stuck drain must not hang
        the program that embeds us."""
        stopping = asyncio.ensure_future(self.app.stop())
        done, _ = await asyncio.wait({stopping}, timeout=self.settings.shutdown_timeout_s)
        if done:
            stopping.result()  # re-raise what a shutdown hook raised
            return True
        log.error(
            "%s: shutdown did not finish in %g s and was abandoned; tasks still waiting:\n%s",
            self.name,
            self.settings.shutdown_timeout_s,
            _task_stacks(),
        )
        stopping.cancel()
        await asyncio.wait({stopping}, timeout=1.0)
        return False

    def run(self) -> None:
        """Serve until SIGINT or SIGTERM (the ``python -m`` entry point of every service)."""
        logging.basicConfig(
            level=os.environ.get("METATUNE_LOG_LEVEL", "INFO"),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        for handler in logging.getLogger().handlers:
            handler.addFilter(RedactingFilter())
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        """FastStream's own ``app.run()`` would wait on a stuck shutdown forever; this one stops
        through :meth:`stop`, and when that had to abandon the shutdown it exits the process at
        once with status 1, because ``asyncio.run``'s clean-up would wait on the stuck task too."""
        signalled = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, signalled.set)
        await self.app.start()
        log.info(
            "%s (%s) serving on %s", self.name, self.instance, redact_url(self.settings.nats_url)
        )
        await signalled.wait()
        log.info("%s (%s) stopping", self.name, self.instance)
        if not await self.stop():
            logging.shutdown()
            os._exit(1)


def _task_stacks() -> str:
    """Where each pending asyncio task waits, following its chain of awaits (a task's own stack
    shows only its outermost coroutine): the diagnosis of a hang."""
    lines = []
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            lines.append(f"task {task.get_name()}:")
            lines.extend(f"  {where}" for where in _await_chain(task.get_coro()))
    return "\n".join(lines)


def _await_chain(awaitable: Any) -> list[str]:
    chain: list[str] = []
    frame: Any = None
    outer: Any
    while awaitable is not None:
        outer, frame = (
            frame,
            next(
                (
                    getattr(awaitable, a)
                    for a in ("cr_frame", "ag_frame", "gi_frame")
                    if getattr(awaitable, a, None) is not None
                ),
                None,
            ),
        )
        if (
            frame is None
        ):  # an async generator's asend(): find the generator in the caller (contextlib)
            found = [
                candidate
                for value in (outer.f_locals.values() if outer else ())
                for candidate in (value, getattr(value, "gen", None))
                if inspect.isasyncgen(candidate) and candidate.ag_running
            ]
            if not found:
                chain.append(f"awaiting {awaitable!r}")
                break
            awaitable, frame = found[0], outer
            continue
        chain.append(f"{frame.f_code.co_qualname} ({frame.f_code.co_filename}:{frame.f_lineno})")
        awaitable = next(
            (
                getattr(awaitable, a)
                for a in ("cr_await", "ag_await", "gi_yieldfrom")
                if getattr(awaitable, a, None) is not None
            ),
            None,
        )
    return chain
