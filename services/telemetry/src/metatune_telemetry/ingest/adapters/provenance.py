"""Telemetry stores a run event only from the datacenter its job is assigned to at that point of
the event log (:mod:`metatune.provenance`).

The assignment in force is the job's latest ``metatune.assignments.*`` event before the run event in
the stream: the ones already stored (``assignments`` joined to ``event_log`` for their stream
sequence) and those earlier in the same batch. Judging by stream position, not by what is current
when telemetry reads, keeps a backlog read after an outage (a job that ran at osl1 and later moved
to fra1) as it was, and a redelivered batch judged as it was the first time. A run event from
anywhere else becomes a reject with code ``foreign_run_event`` (kept, with its bytes, in
``event_rejects``, and reported on ``metatune.errors.telemetry``): no metric, energy, result or
webhook comes of it.

With several writer processes (``telemetry_writers`` > 1) batches are written concurrently: a run
event may be judged while another writer still holds the batch with its job's assignment,
uncommitted (a backlog read by several writers at once). So there a refusal is not final at once:
the event is handed back (``deferred``) and redelivered after a delay until it has been delivered
:data:`FINAL_DELIVERY` times; by then the concurrent batch has committed or been redelivered
itself, and the judgement is the one a single writer makes. One writer (the default) judges the
log strictly in order and refuses at the first delivery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from metatune.provenance import FOREIGN_RUN_EVENT, RUN_EVENTS, AssignmentLog

from ...domain.events import Accepted, Rejected, clean_text

# the delivery at which a concurrent writer's refusal is final (redelivered after 1, 2, 4 s)
FINAL_DELIVERY = 4

# the job's latest assignment stored before ``stream_seq`` of ``stream``
LATEST_ASSIGNMENTS = (
    "SELECT DISTINCT ON (a.job_id) a.job_id, a.datacenter FROM assignments a "
    "JOIN event_log l ON l.event_id = a.event_id AND l.occurred_at = a.occurred_at "
    "WHERE a.job_id = ANY(%s) AND l.stream = %s AND l.stream_seq < %s "
    "ORDER BY a.job_id, l.stream_seq DESC"
)


@dataclass
class Judgement:
    keep: list[tuple[Any, Accepted]] = field(default_factory=list)  # to store
    refused: list[tuple[Any, Rejected]] = field(default_factory=list)  # foreign run events
    deferred: list[Any] = field(default_factory=list)  # refusals not final yet (to redeliver)


async def judge(
    cur: psycopg.AsyncCursor[Any],
    accepted: Sequence[tuple[Any, Accepted]],
    *,
    concurrent: bool = False,
) -> Judgement:
    """Split ``accepted`` (messages with ``stream``, ``seq`` and ``delivered``, in any order) into
    the events to store and the run events refused as foreign; with ``concurrent`` writers, a
    refusal before the message's :data:`FINAL_DELIVERY` is deferred instead."""
    ordered = sorted(accepted, key=lambda item: (item[0].stream, item[0].seq))
    runs = [(m, o) for m, o in ordered if isinstance(o.event, RUN_EVENTS)]
    if not runs:
        return Judgement(keep=list(accepted))
    logs: dict[str, AssignmentLog] = {}  # per stream, from the assignments stored before
    for stream in {m.stream for m, _ in runs}:
        first = min(m.seq for m, _ in ordered if m.stream == stream)
        jobs = list({o.event.job_id for m, o in runs if m.stream == stream})  # type: ignore[attr-defined]
        await cur.execute(LATEST_ASSIGNMENTS, (jobs, stream, first))
        logs[stream] = AssignmentLog(dict(await cur.fetchall()))
    out = Judgement()
    for m, o in ordered:
        log = logs.get(m.stream)
        refusal = log.judge(m.subject, o.event) if log is not None else None
        if refusal is not None and concurrent and m.delivered < FINAL_DELIVERY:
            out.deferred.append(m)
        elif refusal is not None:
            out.refused.append(
                (m, Rejected(m.subject, FOREIGN_RUN_EVENT, clean_text(refusal.message)))
            )
        else:
            out.keep.append((m, o))
    return out
