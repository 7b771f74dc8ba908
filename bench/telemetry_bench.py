"""Telemetry ingestion: batched COPY (the service's writer) against row-by-row INSERT, same run.

Both paths store training-metric events (``metatune.runs.<job>.progress``: one ``event_log`` row
and one ``run_metrics`` row each, plus the job-hour energy upsert) with 10 % of the messages
redelivered; the rows stored must equal the unique events (nothing lost, nothing doubled). The
COPY path includes contract validation and everything the service does per batch; the baseline
is what the service did before: one autocommitted INSERT per row, skipping known event ids.

    python bench/telemetry_bench.py [--events 100000] [--batch 1000] [--json]

Each path writes into a schema of its own in METATUNE_DATABASE_URL, dropped at the end. Beside the
rates, the COPY path's CPU seconds (this process; the PostgreSQL backend where the server runs on
this machine) and the 1-minute load average before and after: on a shared machine the rate says
how much CPU the run was given, the CPU seconds what the work costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb
from rich.console import Console
from rich.table import Table

from metatune import contracts as c
from metatune import subjects
from metatune.settings import Settings
from metatune_telemetry.adapters.db import Database
from metatune_telemetry.adapters.writer import EventWriter, Incoming


def messages(n: int, redelivered: float, seed: int) -> tuple[list[Incoming], int]:
    """``n`` progress events of 20 jobs, then ``redelivered`` of them again (shuffled in)."""
    rng = random.Random(seed)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    jobs = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(20)]
    out = []
    for i in range(n):
        job = jobs[i % len(jobs)]
        at = start + timedelta(seconds=2 * (i // len(jobs)))
        hour = at.replace(minute=0, second=0, microsecond=0)
        energy = 0.1 * (i // len(jobs))
        event = c.RunProgress(
            occurred_at=at,
            job_id=job,
            datacenter="fra1",
            step=i // len(jobs),
            total_steps=10**6,
            train_loss=1.0 / (1 + i),
            learning_rate=3e-4,
            power_w=250.0,
            step_time_s=0.5,
            accounting=c.RunAccounting(
                tokens_seen=512 * i,
                tokens_with_padding=600 * i,
                energy_wh=energy,
                hours=[
                    c.HourlyEnergy(
                        hour=hour,
                        datacenter="fra1",
                        pue=1.2,
                        energy_wh=energy,
                        g_per_kwh=300.0,
                        emissions_g=energy * 0.36,
                    )
                ],
            ),
        )
        out.append(Incoming("METATUNE", i + 1, subjects.run_progress(job), event.to_bytes()))
    again = rng.sample(range(n), int(n * redelivered))
    keyed = [(float(i), m) for i, m in enumerate(out)]
    # each redelivery arrives after its original, somewhere later in the run, with a new stream sequence
    keyed += [
        (rng.uniform(i, n), Incoming(out[i].stream, n + k + 1, out[i].subject, out[i].data))
        for k, i in enumerate(again)
    ]
    stream = [m for _, m in sorted(keyed, key=lambda pair: pair[0])]
    return stream, n


def backend_cpu_s(pid: int) -> float | None:
    """CPU seconds a PostgreSQL backend has used (None unless the server runs on this machine)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def copy_path(
    url: str, schema: str, stream: list[Incoming], batch: int
) -> tuple[float, int, int, dict]:
    """The service's writer; also where the time went: this process's CPU, the backend's CPU."""
    db = Database(url, schema=schema, max_size=1)  # one connection, so one backend to account for
    await db.migrate()
    writer = EventWriter(db)
    backend = (await db.fetch("SELECT pg_backend_pid()"))[0][0]
    server_before, started, cpu_started = (
        backend_cpu_s(backend),
        time.perf_counter(),
        time.process_time(),
    )
    for i in range(0, len(stream), batch):
        await writer.write(stream[i : i + batch])
    elapsed = time.perf_counter() - started
    server_after = backend_cpu_s(backend)
    cpu = {
        "client_cpu_s": round(time.process_time() - cpu_started, 2),
        "server_cpu_s": None
        if server_before is None or server_after is None
        else round(server_after - server_before, 2),
    }
    stored = (await db.fetch("SELECT count(*) FROM run_metrics"))[0][0]
    logged = (await db.fetch("SELECT count(*) FROM event_log"))[0][0]
    await db.close()
    return elapsed, stored, logged, cpu


async def insert_path(url: str, schema: str, stream: list[Incoming]) -> tuple[float, int, int]:
    """The baseline: parse, then one INSERT per row in autocommit (the service before batching)."""
    db = Database(url, schema=schema)
    await db.migrate()
    await db.close()
    async with await psycopg.AsyncConnection.connect(
        url, autocommit=True, options=f"-c search_path={schema}"
    ) as conn:
        await conn.execute(
            "SELECT telemetry_ensure_partition('event_log', '2026-03-01'), "
            "telemetry_ensure_partition('run_metrics', '2026-03-01')"
        )
        started = time.perf_counter()
        for m in stream:
            e = c.RunProgress.model_validate_json(m.data)
            cur = await conn.execute(
                "INSERT INTO event_log (occurred_at, event_id, subject, correlation_id, stream, stream_seq, payload) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (
                    e.occurred_at,
                    e.event_id,
                    m.subject,
                    e.correlation_id,
                    m.stream,
                    m.seq,
                    Jsonb(json.loads(m.data)),
                ),
            )
            if cur.rowcount == 1:
                a = e.accounting
                await conn.execute(
                    "INSERT INTO run_metrics (time, event_id, job_id, datacenter, step, total_steps, train_loss, "
                    "val_loss, learning_rate, power_w, step_time_s, tokens_seen, tokens_with_padding, energy_wh) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        e.occurred_at,
                        e.event_id,
                        e.job_id,
                        e.datacenter,
                        e.step,
                        e.total_steps,
                        e.train_loss,
                        e.val_loss,
                        e.learning_rate,
                        e.power_w,
                        e.step_time_s,
                        a.tokens_seen,
                        a.tokens_with_padding,
                        a.energy_wh,
                    ),
                )
        elapsed = time.perf_counter() - started
        stored = (await (await conn.execute("SELECT count(*) FROM run_metrics")).fetchone())[0]
        logged = (await (await conn.execute("SELECT count(*) FROM event_log")).fetchone())[0]
    return elapsed, stored, logged


async def main(args: argparse.Namespace) -> dict:
    url = args.database_url or Settings().database_url
    stream, unique = messages(args.events, 0.10, args.seed)
    small, small_unique = messages(args.baseline_events, 0.10, args.seed)
    schemas = [f"bench_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        load_before = os.getloadavg()[0]
        copy_s, copy_stored, copy_logged, cpu = await copy_path(url, schemas[0], stream, args.batch)
        insert_s, insert_stored, insert_logged = await insert_path(url, schemas[1], small)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    copy_rate = copy_stored / copy_s
    insert_rate = insert_stored / insert_s
    if (
        copy_stored != unique
        or copy_logged != unique
        or insert_stored != small_unique
        or insert_logged != small_unique
    ):
        print(
            f"LOST OR DOUBLED: copy {copy_stored}/{copy_logged} of {unique}, "
            f"insert {insert_stored}/{insert_logged} of {small_unique}",
            file=sys.stderr,
        )
    return {
        "copy_rows_per_s": round(copy_rate, 1),
        "insert_rows_per_s": round(insert_rate, 1),
        "speedup": round(copy_rate / insert_rate, 2),
        "stored": copy_stored,
        "unique": unique,
        "messages": len(stream),
        "batch": args.batch,
        "insert_stored": insert_stored,
        "insert_unique": small_unique,
        "insert_messages": len(small),
        **cpu,
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, default=100_000, help="unique metric events through the COPY path"
    )
    parser.add_argument(
        "--baseline-events",
        type=int,
        default=10_000,
        help="unique events through row-by-row INSERT",
    )
    parser.add_argument("--batch", type=int, default=1000, help="messages per COPY batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--database-url", default=None, help="default: METATUNE_DATABASE_URL")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    result = asyncio.run(main(args))
    if args.json:
        print(json.dumps(result))
    else:
        table = Table(title="telemetry ingestion, 10 % redelivered (metric rows stored per second)")
        for col in ("path", "messages", "rows stored", "unique events", "rows/s"):
            table.add_column(col, justify="right")
        table.add_row(
            f"COPY batches of {args.batch}",
            f"{result['messages']:,}",
            f"{result['stored']:,}",
            f"{result['unique']:,}",
            f"{result['copy_rows_per_s']:,.0f}",
        )
        table.add_row(
            "row-by-row INSERT",
            f"{result['insert_messages']:,}",
            f"{result['insert_stored']:,}",
            f"{result['insert_unique']:,}",
            f"{result['insert_rows_per_s']:,.0f}",
        )
        Console().print(table)
        Console().print(
            f"speedup {result['speedup']:.1f}x; COPY path CPU: client {result['client_cpu_s']} s, "
            f"server {result['server_cpu_s']} s; load average {result['load_avg_1m']}"
        )
