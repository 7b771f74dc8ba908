"""Store a batch of bus messages in one transaction: raw log by COPY, typed rows, rejects, outbox.

Idempotent by ``event_id``: the batch is COPYed (binary) into a temporary staging table and inserted
with ``ON CONFLICT DO NOTHING ... RETURNING``, and only the events that were new add typed rows
and notifications, so a redelivered message (same batch or a later one) stores nothing twice.
Messages that are not valid events go to ``event_rejects`` with their exact bytes and the
reason. If the database refuses something in a batch (a value it cannot hold), the batch is
written message by message and the one it refuses becomes a reject: one bad row never blocks
the rest. :class:`~metatune.errors.DatabaseUnavailable` propagates: the caller holds the batch.

Several writers (processes sharing a stream) may store the same event at once: events are
inserted in id order, partitions and the job-hour energy with its rollups are written under
transaction-scoped advisory locks, and a batch PostgreSQL aborts as a deadlock or serialization
failure is written again, never taken for a bad message.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from metatune.errors import DatabaseUnavailable
from metatune.redaction import redact

from ...adapters.db import Database
from ...domain.events import Accepted, Rejected, classify, clean_text
from ...webhooks.adapters.completion import study_endings
from ...webhooks.domain.completion import ending_ref
from ...webhooks.domain.notifications import Notification, notification_for, webhook_body
from ..domain.rows import TypedRows
from .binary_copy import target
from .provenance import judge

log = logging.getLogger("metatune.telemetry.writer")

STAGE_EVENTS = target(
    "stage_events",
    "occurred_at timestamptz, event_id uuid, subject text, correlation_id text, "
    "stream text, stream_seq int8, payload text, raw bytea",
)
RUN_METRICS = target(
    "run_metrics",
    "time timestamptz, event_id uuid, job_id uuid, datacenter text, step int4, "
    "total_steps int4, train_loss float8, val_loss float8, learning_rate float8, power_w float8, "
    "step_time_s float8, tokens_seen int8, tokens_with_padding int8, energy_wh float8",
)
# a batch whose steps clash with stored ones (the same job, instant and step from another event)
STAGE_METRICS = target("stage_metrics", RUN_METRICS.definition)
INSERT_METRICS = (
    f"INSERT INTO run_metrics ({RUN_METRICS.names}) SELECT {RUN_METRICS.names} FROM stage_metrics "
    "ON CONFLICT DO NOTHING"
)
AGENT_STATUS = target(
    "agent_status",
    "time timestamptz, event_id uuid, datacenter text, region text, gpus_total int4, "
    "gpus_free int4, gpu_model text, power_per_gpu_w float8, pue float8, running_jobs int4",
)
STAGE_FORECASTS = target(
    "stage_forecasts",
    "hour timestamptz, region text, issued_at timestamptz, g_per_kwh float8, "
    "p10_g_per_kwh float8, p90_g_per_kwh float8, model_version text, stale bool, imputed bool, "
    "short_history bool",
)
STAGE_ENERGY = target(
    "stage_energy",
    "hour timestamptz, job_id uuid, datacenter text, pue float8, energy_wh float8, "
    "g_per_kwh float8, emissions_g float8, source_at timestamptz",
)
# staging tables: private to the connection, never WAL-logged, emptied by the commit (one round trip)
STAGE_DDL = "; ".join(
    f"CREATE TEMP TABLE IF NOT EXISTS {t.table} ({t.definition}) ON COMMIT DELETE ROWS"
    for t in (STAGE_EVENTS, STAGE_FORECASTS, STAGE_ENERGY)
)
# the payload is staged as text and stored as json (telemetry_0003): the message as published.
# In event id order: writers that share the stream then take the key locks of an event that
# reached both in the same order, so they wait for each other instead of deadlocking
INSERT_EVENTS = (
    f"INSERT INTO event_log ({STAGE_EVENTS.names}) SELECT occurred_at, event_id, subject, correlation_id, "
    "stream, stream_seq, payload::json, raw FROM stage_events ORDER BY event_id "
    "ON CONFLICT DO NOTHING RETURNING stream, stream_seq"
)
# job-hour energy and its rollups (a delete and re-insert of the hours touched) are written by one
# transaction at a time: the lock is held to commit, so each refresh sees the rows before it
ENERGY_LOCK = "SELECT pg_advisory_xact_lock(1952803941, hashtext(current_schema()))"
# a job-hour priced by one accounting keeps its price when another reports it unpriced (the
# upsert above keeps it for a newer unpriced report; this fills it for an older priced one)
ENERGY_PRICE_KEPT = (
    "UPDATE job_energy e SET g_per_kwh = s.g_per_kwh, "
    "emissions_g = e.energy_wh / 1000 * e.pue * s.g_per_kwh FROM stage_energy s "
    "WHERE e.job_id = s.job_id AND e.hour = s.hour AND e.datacenter = s.datacenter "
    "AND e.g_per_kwh IS NULL AND s.g_per_kwh IS NOT NULL"
)
PARTITION_LOCK = "SELECT pg_advisory_xact_lock(1952803942, hashtext(current_schema()))"
# an hour reported again by a later issue (a provider revising it) replaces the earlier report
# an hour of an issue is stored once; a later forecast that carried it (a stale one repeats its
# issue's hours) adds its flags (telemetry_0011), so the disclosure knows what priced an hour
INSERT_FORECASTS = (
    f"INSERT INTO forecast_points ({STAGE_FORECASTS.names}) SELECT {STAGE_FORECASTS.names} "
    "FROM stage_forecasts ORDER BY region, issued_at, hour "
    "ON CONFLICT (region, issued_at, hour) DO UPDATE SET "
    "stale = forecast_points.stale OR EXCLUDED.stale, "
    "short_history = forecast_points.short_history OR EXCLUDED.short_history "
    "WHERE (EXCLUDED.stale AND NOT forecast_points.stale) "
    "OR (EXCLUDED.short_history AND NOT forecast_points.short_history)"
)
OBSERVED_SQL = (
    "INSERT INTO observed_intensity (region, hour, signal, g_per_kwh, source, issued_at, "
    "emission_factors) VALUES (%s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (region, hour, signal) DO UPDATE SET "
    "g_per_kwh = EXCLUDED.g_per_kwh, source = EXCLUDED.source, issued_at = EXCLUDED.issued_at, "
    "emission_factors = EXCLUDED.emission_factors "
    "WHERE observed_intensity.issued_at <= EXCLUDED.issued_at"
)
TRANSIENT = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
TRANSIENT_RETRIES = 5
RESULT_COLUMNS = (
    "job_id, study_id, status, finished_at, datacenter, config, metrics, failure_reason, steps, "
    "early_stopped, tokens_seen, tokens_with_padding, energy_wh, gpu_hours, wall_seconds, power_source, "
    "hardware, stop_reason, majority_baseline, emissions_g, adapter_key"
)

OUTBOX_SQL = """
WITH changed AS (
    INSERT INTO notify_state (entity_id, state) VALUES (%(entity)s, %(state)s)
    ON CONFLICT (entity_id) DO UPDATE SET state = EXCLUDED.state, changed_at = now()
        WHERE notify_state.state <> EXCLUDED.state
    RETURNING 1
), study AS (
    SELECT study_id FROM studies WHERE study_id = %(ref)s
    UNION ALL
    SELECT study_id FROM job_requests WHERE job_id = %(ref)s
    LIMIT 1
)
INSERT INTO webhook_outbox (message_id, study_id, event_id, event_type, url, body)
SELECT %(message_id)s, s.study_id, %(event_id)s, %(event_type)s, s.webhook_url, %(body)s
FROM changed, study JOIN studies s USING (study_id)
WHERE s.webhook_url IS NOT NULL
ON CONFLICT (message_id) DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class Incoming:
    """One message as read from JetStream."""

    stream: str
    seq: int
    subject: str
    data: bytes
    delivered: int = 1  # how often JetStream has delivered it (this time included)


@dataclass
class WriteResult:
    stored: int = 0  # new events in the log
    duplicates: int = 0  # valid events already stored (redeliveries)
    rejected: list[tuple[Incoming, Rejected]] = field(default_factory=list)
    notifications: int = 0
    deferred: list[Incoming] = field(default_factory=list)  # to redeliver, not ack (provenance)


class EventWriter:
    def __init__(
        self,
        db: Database,
        unseal: Callable[[str], str] | None = None,
        *,
        concurrent: bool = False,
    ) -> None:
        self.db = db
        self.unseal = unseal  # opens sealed webhook URLs (metatune.webhook_seal)
        self.concurrent = concurrent  # other writers share the stream (provenance.judge)
        self._partitions: set[tuple[str, datetime]] = set()  # known to exist (committed)

    async def write(self, batch: Sequence[Incoming]) -> WriteResult:
        """Store ``batch`` (any mix of valid and invalid messages) exactly once."""
        classified = [(m, classify(m.subject, m.data)) for m in batch]
        try:
            return await self._retrying(classified)
        except DatabaseUnavailable:
            raise
        except Exception as exc:
            if len(classified) == 1:
                message = classified[0][0]
                reason = clean_text(redact(f"{type(exc).__name__}: {str(exc).strip()}"))
                log.warning(
                    "stream %s seq %d refused by the database, stored as a reject: %s",
                    message.stream,
                    message.seq,
                    reason,
                )
                return await self._write(
                    [(message, Rejected(message.subject, "unstorable", reason))]
                )
            log.warning(
                "a batch of %d was refused (%s: %s); storing its messages one by one",
                len(classified),
                type(exc).__name__,
                clean_text(redact(str(exc).strip()))[:300],
            )
            total = WriteResult()
            for item in classified:  # isolate the message the database refuses
                one = await self._write_or_reject(item)
                total.stored += one.stored
                total.duplicates += one.duplicates
                total.rejected += one.rejected
                total.notifications += one.notifications
                total.deferred += one.deferred
            return total

    async def _retrying(
        self, classified: Sequence[tuple[Incoming, Accepted | Rejected]]
    ) -> WriteResult:
        """``_write``, again when PostgreSQL aborted it for a conflict with another writer (a
        deadlock or serialization failure says nothing about the messages)."""
        for attempt in range(TRANSIENT_RETRIES):
            try:
                return await self._write(classified)
            except TRANSIENT as exc:
                log.info("batch aborted by a concurrent writer (%s); retrying", type(exc).__name__)
                await asyncio.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
        return await self._write(classified)

    async def _write_or_reject(self, item: tuple[Incoming, Accepted | Rejected]) -> WriteResult:
        try:
            return await self._retrying([item])
        except DatabaseUnavailable:
            raise
        except Exception as exc:
            message = item[0]
            reason = clean_text(redact(f"{type(exc).__name__}: {str(exc).strip()}"))
            return await self._write([(message, Rejected(message.subject, "unstorable", reason))])

    async def _write(
        self, classified: Sequence[tuple[Incoming, Accepted | Rejected]]
    ) -> WriteResult:
        result = WriteResult()
        accepted = [(m, o) for m, o in classified if isinstance(o, Accepted)]
        result.rejected = [(m, o) for m, o in classified if isinstance(o, Rejected)]
        created: set[tuple[str, datetime]] = set()  # partitions this transaction creates
        async with self.db.connection() as conn, conn.transaction():
            cur = conn.cursor()
            new: set[tuple[str, int]] = (
                set()
            )  # (stream, sequence) of the messages whose event was new
            if accepted:
                judged = await judge(cur, accepted, concurrent=self.concurrent)
                accepted = judged.keep
                result.rejected += judged.refused
                result.deferred = judged.deferred
            if accepted:
                await cur.execute(STAGE_DDL)
                await self._ensure_partitions(
                    cur, "event_log", {o.event.occurred_at for _, o in accepted}, created
                )
                await STAGE_EVENTS.copy(
                    cur,
                    (
                        (
                            o.event.occurred_at,
                            o.event.event_id,
                            clean_text(m.subject),
                            clean_text(o.event.correlation_id) if o.event.correlation_id else None,
                            m.stream,
                            m.seq,
                            o.payload_json,
                            o.raw,
                        )
                        for m, o in accepted
                    ),
                )
                await cur.execute(INSERT_EVENTS)
                new = {(stream, seq) for stream, seq in await cur.fetchall()}
            result.stored = len(new)
            result.duplicates = len(accepted) - len(new)
            # matched by message, not event id (cheaper to hash); the same event twice in one batch
            # returned only the message that was inserted, so it adds rows once
            fresh = [o for m, o in accepted if (m.stream, m.seq) in new]
            rows = TypedRows(unseal=self.unseal)
            for o in fresh:
                rows.add(o.event)
            await self._typed(cur, rows, created)
            for study in rows.unopened:
                log.warning(
                    "study %s: its sealed webhook URL does not open with this telemetry's key "
                    "(sealed for another?); delivering to the URL without its credentials",
                    study,
                )
            for o in fresh:
                result.notifications += await self._enqueue(cur, o)
            result.notifications += await self._study_endings(cur, fresh)
            if result.rejected:
                await cur.executemany(
                    "INSERT INTO event_rejects (stream, stream_seq, subject, code, reason, raw) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (stream, stream_seq) DO NOTHING",
                    [
                        (
                            m.stream,
                            m.seq,
                            clean_text(m.subject),
                            r.code,
                            clean_text(redact(r.reason)),
                            m.data,
                        )
                        for m, r in result.rejected
                    ],
                )
        self._partitions |= created  # committed
        return result

    async def _ensure_partitions(
        self,
        cur: psycopg.AsyncCursor[Any],
        table: str,
        times: set[datetime],
        created: set[tuple[str, datetime]],
    ) -> None:
        """Create the monthly partitions ``times`` fall in, under a lock held to commit: a writer
        that needs the same month waits, then finds it (two concurrent creations, one fails).
        Remembered only once committed (``created``, then ``_partitions``): a rollback takes
        them back."""
        if self.db.mode != "postgresql":
            return
        months = {ts.replace(day=1, hour=0, minute=0, second=0, microsecond=0) for ts in times}
        missing = [m for m in months if (table, m) not in self._partitions]
        if missing:
            await cur.execute(PARTITION_LOCK)
        for month in missing:
            await cur.execute("SELECT telemetry_ensure_partition(%s, %s)", (table, month))
            created.add((table, month))

    async def _typed(
        self,
        cur: psycopg.AsyncCursor[Any],
        rows: TypedRows,
        created: set[tuple[str, datetime]],
    ) -> None:
        for table, months in rows.months().items():
            await self._ensure_partitions(cur, table, months, created)
        if rows.run_metrics:
            await self._metrics(cur, rows.run_metrics)
        if rows.agent_status:
            await AGENT_STATUS.copy(cur, rows.agent_status)
        if rows.forecast_points:
            await STAGE_FORECASTS.copy(cur, rows.forecast_rows())
            await cur.execute(INSERT_FORECASTS)
        observed = rows.observed_rows()
        if observed:
            await cur.executemany(OBSERVED_SQL, observed)
        if energy := rows.job_energy_rows():
            await self._energy(cur, energy)
        await self._records(cur, rows)

    async def _energy(self, cur: psycopg.AsyncCursor[Any], energy: list[tuple[Any, ...]]) -> None:
        """Each job's metered hours: the newest reading of an hour wins, a price once known is
        kept; the rollups of those hours refreshed."""
        await STAGE_ENERGY.copy(cur, energy)
        await cur.execute(ENERGY_LOCK)
        await cur.execute(
            f"INSERT INTO job_energy ({STAGE_ENERGY.names}) SELECT {STAGE_ENERGY.names} FROM stage_energy "
            "ORDER BY job_id, hour, datacenter ON CONFLICT (job_id, hour, datacenter) DO UPDATE SET pue = EXCLUDED.pue, energy_wh = EXCLUDED.energy_wh, "
            "g_per_kwh = coalesce(EXCLUDED.g_per_kwh, job_energy.g_per_kwh), "
            "emissions_g = coalesce(EXCLUDED.emissions_g, "
            "EXCLUDED.energy_wh / 1000 * EXCLUDED.pue * job_energy.g_per_kwh), source_at = EXCLUDED.source_at "
            "WHERE (job_energy.source_at, job_energy.energy_wh) <= (EXCLUDED.source_at, EXCLUDED.energy_wh)"
        )
        await cur.execute(ENERGY_PRICE_KEPT)
        if self.db.mode == "postgresql":
            hours = [row[0] for row in energy]
            await cur.execute(
                "SELECT telemetry_refresh_rollups(%s, %s)",
                (min(hours), max(hours) + timedelta(hours=1)),
            )

    async def _records(self, cur: psycopg.AsyncCursor[Any], rows: TypedRows) -> None:
        """Studies, profiles, requests, results, stops, cancellations, plans and assignments:
        each row once (its key), a failed result replaced by a later one."""
        if rows.studies:
            await cur.executemany(
                "INSERT INTO studies (study_id, submitted_at, webhook_url, base_model, task, "
                "home_datacenter, spec) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                rows.studies,
            )
        if rows.study_profiles:  # a study profiled again keeps its latest profile
            await cur.executemany(
                "INSERT INTO study_profiles (study_id, profiled_at, n_classes) VALUES (%s, %s, %s) "
                "ON CONFLICT (study_id) DO UPDATE SET profiled_at = EXCLUDED.profiled_at, "
                "n_classes = EXCLUDED.n_classes WHERE study_profiles.profiled_at <= EXCLUDED.profiled_at",
                rows.study_profiles,
            )
        if rows.job_requests:
            await cur.executemany(
                "INSERT INTO job_requests (job_id, study_id, trial_index, requested_at, base_model, home_datacenter, "
                "config, predicted_loss, predicted_loss_std, gpus, estimated_gpu_hours, power_kw, deadline, metric_name, "
                "predicted_metric, predicted_metric_std, predicted_metric_low, predicted_metric_high) VALUES (%s, %s, %s, "
                "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                rows.job_requests,
            )
        if rows.run_results:
            updates = ", ".join(
                f"{c} = EXCLUDED.{c}" for c in RESULT_COLUMNS.split(", ") if c != "job_id"
            )
            await cur.executemany(
                f"INSERT INTO run_results ({RESULT_COLUMNS}) VALUES ({', '.join(['%s'] * len(RESULT_COLUMNS.split(', ')))}) "
                f"ON CONFLICT (job_id) DO UPDATE SET {updates} WHERE run_results.status = 'failed'",
                rows.run_results,
            )
        if rows.study_stops:
            await cur.executemany(
                "INSERT INTO study_stops (study_id, stopped_at, trials_requested, metric_name) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                rows.study_stops,
            )
        if rows.job_cancellations:
            await cur.executemany(
                "INSERT INTO job_cancellations (job_id, study_id, cancelled_at) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                rows.job_cancellations,
            )
        if rows.plans:
            await cur.executemany(
                "INSERT INTO plans VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                rows.plans,
            )
        if rows.plan_entries:
            await cur.executemany(
                "INSERT INTO plan_entries VALUES (%s, %s, %s, %s, %s)", rows.plan_entries
            )
        if rows.assignments:
            await cur.executemany(
                "INSERT INTO assignments VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                rows.assignments,
            )

    async def _metrics(self, cur: psycopg.AsyncCursor[Any], rows: list[tuple[Any, ...]]) -> None:
        """COPY straight into ``run_metrics`` (keyed by job, time and step); should a step be
        there already, from another event carrying it (a producer re-sending points under a new
        event id), the batch's rows go through a staging table and ``ON CONFLICT DO NOTHING``
        instead, so each step is stored once and the rest of the batch goes in."""
        try:
            async with cur.connection.transaction():  # a savepoint: a clash undoes the COPY only
                await RUN_METRICS.copy(cur, rows)
        except psycopg.errors.UniqueViolation:
            await cur.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {STAGE_METRICS.table} ({STAGE_METRICS.definition}) "
                "ON COMMIT DELETE ROWS"
            )
            await STAGE_METRICS.copy(cur, rows)
            await cur.execute(INSERT_METRICS)

    async def _enqueue(self, cur: psycopg.AsyncCursor[Any], accepted: Accepted) -> int:
        note = notification_for(accepted.event)
        if note is None:
            return 0
        return await _outbox(cur, note, webhook_body(note, accepted.subject, accepted.event))

    async def _study_endings(self, cur: psycopg.AsyncCursor[Any], fresh: list[Accepted]) -> int:
        """Queue ``study.completed`` for the studies the new events ended (see adapters/completion.py)."""
        refs: dict[UUID, datetime] = {}
        for o in fresh:
            ref = ending_ref(o.event)
            if ref is not None:
                refs[ref] = max(o.event.occurred_at, refs.get(ref, o.event.occurred_at))
        queued = 0
        for note, body in await study_endings(cur, refs) if refs else []:
            queued += await _outbox(cur, note, body)
        return queued


async def _outbox(cur: psycopg.AsyncCursor[Any], note: Notification, body: str) -> int:
    """Queue ``note`` for its study's webhook, once per state change and message id."""
    await cur.execute(
        OUTBOX_SQL,
        {
            "entity": note.entity_id,
            "state": note.state,
            "ref": note.ref,
            "message_id": note.message_id,
            "event_id": note.event_id,
            "event_type": note.event_type,
            "body": body,
        },
    )
    return cur.rowcount if cur.rowcount > 0 else 0
