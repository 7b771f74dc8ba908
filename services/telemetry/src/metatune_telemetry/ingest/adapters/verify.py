"""``metatune telemetry verify``: every message in the streams is in the database.

A message is accounted for when its ``event_id`` is in ``event_log`` or its (stream, sequence)
is in ``event_rejects``. The stream is read with an ephemeral consumer that acks nothing, the
pairs are COPYed into a temporary table and compared in one query. The messages the stream still
holds are checked (the status stream keeps only recent ones, and the event stream 30 days).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from uuid import UUID

import nats.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from ...adapters.db import Database


@dataclass
class StreamCheck:
    stream: str
    messages: int = 0
    stored: int = 0
    rejected: int = 0
    missing: list[tuple[int, str]] = field(default_factory=list)  # (sequence, subject)

    @property
    def gap(self) -> int:
        return len(self.missing)


def _event_id(data: bytes) -> UUID | None:
    try:
        value = json.loads(data).get("event_id")
        return UUID(str(value)) if value else None
    except (ValueError, AttributeError, TypeError):
        return None


async def read_stream(
    js: JetStreamContext, stream: str, batch: int = 1000
) -> list[tuple[int, str, UUID | None]]:
    """(sequence, subject, event_id) of every message ``stream`` holds now."""
    info = await js.stream_info(stream)
    last = info.state.last_seq
    if info.state.messages == 0:
        return []
    sub = await js.pull_subscribe(
        "metatune.>",
        stream=stream,
        config=ConsumerConfig(
            ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=30.0
        ),
    )
    out: list[tuple[int, str, UUID | None]] = []
    try:
        while True:
            try:
                msgs = await sub.fetch(batch, timeout=2.0)
            except (nats.errors.TimeoutError, TimeoutError):
                break
            for m in msgs:
                seq = m.metadata.sequence.stream
                if seq <= last:
                    out.append((seq, m.subject, _event_id(m.data)))
            if out and out[-1][0] >= last:
                break
    finally:
        await sub.unsubscribe()
    return out


async def verify(js: JetStreamContext, db: Database, streams: list[str]) -> list[StreamCheck]:
    checks = []
    for stream in streams:
        messages = await read_stream(js, stream)
        check = StreamCheck(stream, messages=len(messages))
        async with db.connection() as conn, conn.transaction():
            await conn.execute(
                "CREATE TEMP TABLE verify_stream (seq bigint, subject text, event_id uuid) ON COMMIT DROP"
            )
            async with conn.cursor().copy(
                "COPY verify_stream (seq, subject, event_id) FROM STDIN"
            ) as copy:
                for row in messages:
                    await copy.write_row(row)
            cur = await conn.execute(
                "SELECT v.seq, v.subject, e.event_id IS NOT NULL, r.id IS NOT NULL FROM verify_stream v "
                "LEFT JOIN (SELECT DISTINCT event_id FROM event_log WHERE event_id IN "
                "(SELECT event_id FROM verify_stream)) e ON e.event_id = v.event_id "
                "LEFT JOIN event_rejects r ON r.stream = %s AND r.stream_seq = v.seq ORDER BY v.seq",
                (stream,),
            )
            for seq, subject, stored, rejected in await cur.fetchall():
                if rejected:
                    check.rejected += 1
                elif stored:
                    check.stored += 1
                else:
                    check.missing.append((seq, subject))
        checks.append(check)
    return checks
