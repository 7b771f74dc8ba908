"""A durable JetStream pull consumer that stores batches and acks only what is stored.

Unlike the one-message handlers of :class:`metatune.service.Service`, telemetry pulls up to
``telemetry_batch_size`` messages and stores them in one COPY transaction. ``max_deliver`` is
unlimited: while PostgreSQL is down the batch is held un-acked (``in_progress`` keeps JetStream
from redelivering it meanwhile), the writer retries with backoff, and the consumer catches up
when the database returns. Nothing is acked before it is committed; a crash between commit
and ack means a redelivery, which the writer stores once.

The pull protocol is spoken directly (a pull request on ``$JS.API.CONSUMER.MSG.NEXT``) rather
than through ``PullSubscription.fetch``, which waits on each message with a task and a timeout
of its own, and on a connection of its own (:class:`IngestClient`) whose pull replies skip
nats-py's per-message path (header parsing, a ``Msg`` object, a queue and a callback): measured,
each of those cost about as much CPU as validating the message. Acks stay explicit (one per
message, so several ingestors, in one process or several, can share the durable consumer), but
a batch's acks leave in one write.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import math
from collections.abc import Awaitable, Callable

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from metatune.bus.retry import retrying
from metatune.errors import DatabaseUnavailable

from ..domain.events import Rejected
from .writer import EventWriter, Incoming, WriteResult

log = logging.getLogger("metatune.telemetry.ingest")
ACK_WAIT_S = 60.0
WAIT_S = 1.0  # how long a pull waits for a first message when the stream is idle
# a pull asks for at most this many bytes too: progress events that carry hundreds of steps each
# would otherwise make a batch of telemetry_batch_size events hundreds of thousands of rows (a
# single message is never larger: NATS' max_payload is 1 MiB by default)
MAX_PULL_BYTES = 4 << 20
ACK = b"+ACK"
IN_PROGRESS = b"+WPI"


# a stored message as the pull reply brings it: subject, ack subject (reply), payload
Raw = tuple[bytes, bytes, bytes]


class IngestClient(Client):
    """A NATS connection for ingestion. A message with a reply subject (a stored JetStream message)
    on a subscription given a *sink* goes straight to the sink as raw bytes; everything else
    (status messages of pull requests, other subscriptions) takes nats-py's usual path.

    ``_process_msg`` is the hook nats-py's protocol parser calls for every MSG / HMSG (the same
    signature since nats-py 2.0); the sink is a plain function, so a batch of 2000 replies costs
    no task, no header parsing and no ``Msg`` object."""

    def __init__(self) -> None:
        super().__init__()
        self._sinks: dict[int, Callable[[Raw], None]] = {}

    def add_sink(self, sub: Subscription, sink: Callable[[Raw], None]) -> None:
        self._sinks[sub._id] = sink

    def remove_sink(self, sub: Subscription) -> None:
        self._sinks.pop(sub._id, None)

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        if reply:
            sink = self._sinks.get(sid)
            if sink is not None:
                sink((subject, reply, data))
                return
        await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]

    async def reply_all(self, replies: list[bytes], payload: bytes) -> None:
        """``payload`` to each of ``replies`` (acks of a batch), written as one buffer. Off line
        (reconnecting), message by message, as :meth:`publish` buffers or refuses them."""
        if not self.is_connected:
            for reply in replies:
                await self.publish(reply.decode(), payload)
            return
        tail = b" %d\r\n%b\r\n" % (len(payload), payload)
        await self._send_command(b"".join(b"PUB " + reply + tail for reply in replies))
        self.stats["out_msgs"] += len(replies)
        if self._flush_queue is not None and self._flush_queue.empty():  # as publish does
            await self._flush_pending()


def stream_seq(reply: str) -> int:
    """The stream sequence in a JetStream ack subject (``$JS.ACK.<stream>.<consumer>.<delivered>.
    <sseq>...``, or the v2 form with domain and account hash before the stream)."""
    tokens = reply.split(".")
    if len(tokens) == 9:
        return int(tokens[5])
    if len(tokens) >= 11 and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[7])
    raise ValueError(f"not a JetStream ack subject: {reply!r}")


def consumer_config(durable: str, max_ack_pending: int) -> ConsumerConfig:
    """Every message of the stream, redelivered until acked, however often (``max_deliver`` -1)."""
    return ConsumerConfig(
        durable_name=durable,
        name=durable,
        filter_subject="metatune.>",
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        max_deliver=-1,
        ack_wait=ACK_WAIT_S,
        max_ack_pending=max_ack_pending,
    )


def settle_heap() -> None:
    """Move what the process holds once started (modules, contracts' schemas, pools) out of the
    cyclic garbage collector's reach (``gc.freeze``): every batch allocates thousands of validated
    models, which trigger collections, and a full collection would traverse all of it again each
    time. Measured: a third off validating a message. The objects are still freed by reference
    counting; only cycles among them are never collected, and a started service makes none."""
    gc.collect()
    gc.freeze()


class Puller:
    """Pull requests for one durable consumer; replies land in a buffer through a sink.

    ``fetch`` first asks for what is there now (``no_wait``: the server answers at once, ending
    with a status when it has fewer than asked), and only on an idle stream waits, up to
    ``WAIT_S``, for one message; the next ``no_wait`` pull then takes everything that came in."""

    def __init__(self, nc: IngestClient, stream: str, durable: str) -> None:
        self.nc = nc
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self.inbox = nc.new_inbox()
        self.buffer: list[Raw] = []
        self.status = ""  # the status that ended the last request ("404", "408", "409", ...)
        self._expected = 0  # messages the open request may still deliver
        self._done = asyncio.Event()
        self._sub: Subscription | None = None

    async def start(self) -> None:
        self._sub = await self.nc.subscribe(self.inbox, cb=self._on_status)
        self.nc.add_sink(self._sub, self._on_message)

    async def stop(self) -> None:
        if self._sub is not None:
            self.nc.remove_sink(self._sub)
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    def _on_message(self, raw: Raw) -> None:  # a stored message (it has an ack subject)
        self.buffer.append(raw)
        self._expected -= 1
        if self._expected <= 0:
            self._done.set()

    async def _on_status(self, msg: Msg) -> None:
        if msg.headers and msg.headers.get("Status") != "100":  # 404/408/409 end the request
            self.status = msg.headers.get("Status", "")
            self._done.set()

    async def _request(self, batch: int, wait_s: float | None) -> None:
        request: dict[str, object] = {"batch": batch, "max_bytes": MAX_PULL_BYTES}
        if wait_s is None:
            request["no_wait"] = True
        else:
            request["expires"] = int(wait_s * 1e9)
        self._expected = batch
        self.status = ""
        self._done.clear()
        await self.nc.publish(self.subject, json.dumps(request).encode(), reply=self.inbox)
        timeout = (wait_s or 0.0) + 5.0  # a status lost to a reconnect must not stall us
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done.wait(), timeout)

    async def fetch(self, batch: int) -> list[Raw]:
        """Up to ``batch`` messages, more only if a late reply of an earlier request came in."""
        if len(self.buffer) < batch:
            await self._request(batch - len(self.buffer), None)
        if not self.buffer:
            await self._request(1, WAIT_S)
            if self.buffer:
                await self._request(batch - len(self.buffer), None)
            elif self.status == "409":  # e.g. max_ack_pending reached: the others hold batches
                await asyncio.sleep(0.1)
        msgs, self.buffer = self.buffer, []
        return msgs


class StreamIngestor:
    def __init__(
        self,
        nc: IngestClient,
        js: JetStreamContext,
        writer: EventWriter,
        *,
        stream: str,
        durable: str,
        batch_size: int,
        on_rejected: Callable[[list[tuple[Incoming, Rejected]]], Awaitable[None]] | None = None,
        status: dict[str, str] | None = None,
        max_ack_pending: int | None = None,
    ) -> None:
        self.nc = nc
        self.js = js
        self.writer = writer
        self.stream = stream
        self.durable = durable
        self.batch_size = batch_size
        self.on_rejected = on_rejected
        self.status = status if status is not None else {}
        # room for every ingestor sharing the durable to hold a batch un-acked, and one more
        self.max_ack_pending = max_ack_pending or max(1000, 4 * batch_size)
        self.stored = 0
        self.pulling = asyncio.Event()  # set once the consumer exists and pull replies have a home

    def consumer_config(self) -> ConsumerConfig:
        return consumer_config(self.durable, self.max_ack_pending)

    async def ensure_consumer(self) -> None:
        """Create the durable consumer, or widen its ``max_ack_pending`` to our batches."""
        config = self.consumer_config()
        try:
            info = await self.js.consumer_info(self.stream, self.durable)
        except NotFoundError:
            await self.js.add_consumer(self.stream, config=config)
            return
        current = info.config.max_ack_pending or 0
        if 0 < current < self.max_ack_pending:
            await self.js.add_consumer(  # create-or-update: only this limit changes
                self.stream, config=info.config.evolve(max_ack_pending=self.max_ack_pending)
            )

    async def run(self) -> None:
        await self.ensure_consumer()
        settle_heap()
        nc = self.nc
        puller = Puller(nc, self.stream, self.durable)
        await puller.start()
        self.pulling.set()
        try:
            while True:
                try:
                    msgs = await puller.fetch(self.batch_size)
                except (nats.errors.ConnectionReconnectingError, nats.errors.TimeoutError):
                    await asyncio.sleep(0.2)
                    continue
                if not msgs:
                    continue
                stream = self.stream
                replies = [reply for _, reply, _ in msgs]
                batch = [
                    Incoming(stream, stream_seq(reply.decode()), subject.decode(), data)
                    for subject, reply, data in msgs
                ]
                result = await self._store(batch, replies)
                await nc.reply_all(replies, ACK)  # only now: everything in the batch is committed
                self.stored += result.stored
                if result.rejected and self.on_rejected is not None:
                    await self.on_rejected(result.rejected)
        finally:  # a pending pull request would hold the broker's drain at shutdown
            await puller.stop()

    async def _store(self, batch: list[Incoming], replies: list[bytes]) -> WriteResult:
        """Write the batch, through a PostgreSQL outage however long (the messages stay ours)."""

        async def attempt() -> WriteResult:
            try:
                return await self.writer.write(batch)
            except DatabaseUnavailable as exc:
                if self.status.get("database") != "unavailable":
                    log.warning(
                        "%s: PostgreSQL unavailable, holding %d message(s) un-acked: %s",
                        self.stream,
                        len(batch),
                        exc,
                    )
                self.status["database"] = "unavailable"
                await self.nc.reply_all(replies, IN_PROGRESS)
                raise

        result = await retrying(
            attempt,
            what=f"{self.stream}: storing a batch",
            budget_s=math.inf,
            initial_s=0.5,
            max_delay_s=5.0,
            transient=(DatabaseUnavailable,),
        )
        if self.status.get("database") != "ok":
            self.status["database"] = "ok"
        return result
