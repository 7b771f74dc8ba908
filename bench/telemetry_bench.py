"""Telemetry ingestion from the bus: the service (batched binary COPY) against row-by-row INSERT.

Both paths read training-metric events (``metatune.runs.<dc>.<job>.progress``: one ``event_log`` row
each, one ``run_metrics`` row per optimizer step the event reports, plus the job-hour energy
upsert) from a JetStream stream of a private nats-server, 10 % of them twice (the same event re-published outside the de-duplication
window: a new stream message), and store them in PostgreSQL; the rows stored must equal the
unique steps (nothing lost, nothing doubled).

Events report ``--points-per-event`` steps each (100: its own and the 99 before it, carried as
``RunProgress.points``), as the trainer-agent sends them: it publishes progress at most every
2 s and holds the steps between, so an event carries 2 s x the step rate; 50 steps/s is a LoRA
fine-tune of a small encoder (the platform's MiniLM, batch 16, 128 tokens) on one GPU, where a
step is a few milliseconds of kernels and ~10-20 ms in all. The run at one step per event (today's
shape, ``--events``) follows, and its figures are under ``one_point_per_event``. The COPY path is the telemetry service itself
(``create_service``: its durable pull consumer, ``--writers`` processes sharing it, contract
validation, staging COPY, ``ON CONFLICT DO NOTHING``, typed rows, job-hour upsert, rollup refresh,
acks after commit); the clock runs from the service being ready (migrated) with the whole stream
waiting, to the consumer's ack floor reaching the last message. The baseline is what the service
did before: one message at a time from a pull consumer, one autocommitted INSERT per row,
skipping known event ids.

    python bench/telemetry_bench.py [--points-per-event 100] [--point-events 5000]
        [--events 100000] [--baseline-events 5000] [--batch 2000] [--writers 2] [--json]

Each path writes into a schema of its own in METATUNE_DATABASE_URL, dropped at the end. Beside the
rates, the CPU seconds the COPY path cost: ``client_cpu_s`` (the service and its writer
processes), ``server_cpu_s`` (its PostgreSQL backends, read from ``/proc``: the server runs on
this machine), ``nats_cpu_s`` (the nats-server), and the 1-minute load average before and after:
on a shared machine the rate says how much CPU the run was given, the CPU seconds what the work
costs.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import nats
import psycopg
from psycopg.types.json import Jsonb
from rich.console import Console
from rich.table import Table

from metatune import catalog, subjects
from metatune import contracts as c
from metatune.bus import ensure_streams
from metatune.processes import die_with_parent
from metatune.settings import Settings
from metatune_cli.embedded import servers
from metatune_telemetry.adapters.db import Database
from metatune_telemetry.app import create_service
from metatune_telemetry.ingest.adapters.writer_pool import LOG_DURABLE, log_consumer_config
from metatune_telemetry.ingest.domain.rows import TypedRows
from metatune_telemetry.settings import TelemetrySettings

Message = tuple[str, bytes, dict[str, str]]  # subject, payload, headers


PROGRESS_INTERVAL_S = 2.0  # the trainer-agent's default agent_progress_interval_s


def messages(
    n: int, redelivered: float, seed: int, points: int = 1
) -> tuple[list[Message], int, int]:
    """``n`` progress events of 20 jobs, then ``redelivered`` of them again (shuffled in). Each
    event reports ``points`` optimizer steps as the trainer-agent sends them: its own and the
    ``points - 1`` since the job's previous event (``RunProgress.points``), 2 s apart per job.
    Returns the stream, the unique events and the unique metric rows."""
    rng = random.Random(seed)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    jobs = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(20)]
    step_s = PROGRESS_INTERVAL_S / points
    out: list[Message] = []
    for i in range(n):
        job = jobs[i % len(jobs)]
        k = i // len(jobs)
        at = start + timedelta(seconds=PROGRESS_INTERVAL_S * (k + 1))
        own = (k + 1) * points  # this event reports steps own - points + 1 .. own
        hour = at.replace(minute=0, second=0, microsecond=0)
        energy = 0.1 * k
        event = c.RunProgress(
            event_id=uuid.UUID(int=rng.getrandbits(128), version=4),
            occurred_at=at,
            job_id=job,
            datacenter="fra1",
            step=own,
            total_steps=10**8,
            train_loss=1.0 / (1 + own),
            learning_rate=3e-4,
            power_w=250.0,
            step_time_s=step_s,
            accounting=c.RunAccounting(
                tokens_seen=512 * own,
                tokens_with_padding=600 * own,
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
            points=[
                c.MetricPoint(
                    step=s,
                    occurred_at=at - timedelta(seconds=step_s * (own - s)),
                    train_loss=1.0 / (1 + s),
                    learning_rate=3e-4,
                    tokens_seen=512 * s,
                    tokens_with_padding=600 * s,
                    step_time_s=step_s,
                )
                for s in range(own - points + 1, own)
            ],
        )
        headers = {"Nats-Msg-Id": str(event.event_id), "content-type": "application/json"}
        out.append((subjects.run_progress("fra1", job), event.to_bytes(), headers))
    again = rng.sample(range(n), int(n * redelivered))
    keyed = [(float(i), m) for i, m in enumerate(out)]
    # each copy arrives after its original, somewhere later in the run; its message id differs
    # (as when re-published after the de-duplication window), so the stream keeps both
    keyed += [
        (rng.uniform(i, n), (out[i][0], out[i][1], {**out[i][2], "Nats-Msg-Id": f"{i}-again"}))
        for i in again
    ]
    # each job's start first: telemetry stores a run event only from its job's datacenter
    starts = [_start(job, start) for job in jobs]
    stream = starts + [m for _, m in sorted(keyed, key=lambda pair: pair[0])]
    return stream, n + len(starts), n * points


def _start(job: uuid.UUID, at: datetime) -> Message:
    event = c.Assignment(
        event_id=uuid.uuid5(job, "start"),
        occurred_at=at,
        job_id=job,
        study_id=job,
        datacenter="fra1",
        action=c.AssignmentAction.start,
        plan_version=1,
    )
    headers = {"Nats-Msg-Id": str(event.event_id), "content-type": "application/json"}
    return subjects.assignments("fra1"), event.to_bytes(), headers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds a process has used (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_children: list[subprocess.Popen[bytes]] = []  # nats-servers this process started, not yet reaped


def _reap() -> None:
    for proc in _children:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    _children.clear()


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: context managers stop the servers, drop the schemas


def start_nats(url: str, tmp: Path) -> subprocess.Popen[bytes]:
    """A private nats-server (JetStream in ``tmp``) that never outlives the bench: in the bench's
    process group, killed by the kernel if the bench dies, terminated at exit and on SIGTERM /
    SIGINT / SIGHUP."""
    host, port = urlsplit(url).hostname, urlsplit(url).port
    (tmp / "nats").mkdir(parents=True, exist_ok=True)
    with open(tmp / "nats-server.log", "ab") as log:
        binary, store = str(servers.nats_server_binary()), str(tmp / "nats")
        proc = subprocess.Popen(
            [binary, "-a", str(host), "-p", str(port), "-js", "-sd", store],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
    _children.append(proc)
    return proc


@contextlib.asynccontextmanager
async def bus(stream: list[Message]) -> AsyncIterator[tuple[TelemetrySettings, nats.NATS, int]]:
    """A private nats-server whose event log stream already holds ``stream``."""
    with tempfile.TemporaryDirectory(prefix="telemetry-bench-") as tmp:
        port = free_port()
        url = f"nats://127.0.0.1:{port}"
        proc = start_nats(url, Path(tmp))
        try:
            for _ in range(400):  # until it listens (nats-py would print each refusal)
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                    break
                await asyncio.sleep(0.05)
            nc = await nats.connect(url, connect_timeout=5)
            settings = TelemetrySettings(nats_url=url, telemetry_http_port=0)
            js = nc.jetstream()
            await ensure_streams(js, settings)
            for i, (subject, data, headers) in enumerate(stream):
                await nc.publish(subject, data, headers=headers)
                if i % 2000 == 1999:
                    await nc.flush()
            await nc.flush()
            while (await js.stream_info(settings.stream_name)).state.messages < len(stream):
                await asyncio.sleep(0.05)
            yield settings, nc, proc.pid
            await nc.close()
        finally:
            _reap()


def with_application_name(url: str, name: str) -> str:
    parts = urlsplit(url)
    query = urlencode({**dict(parse_qsl(parts.query)), "application_name": name})
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


async def backends(db: Database, app: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected under ``app``."""
    rows = await db.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,))
    cpu = {pid: process_cpu_s(pid) for (pid,) in rows}
    return {pid: s for pid, s in cpu.items() if s is not None}


async def copy_path(
    url: str, schema: str, stream: list[Message], events: int, batch: int, writers: int
) -> dict:
    """The telemetry service, from its durable consumer to committed rows and acks."""
    app = f"bench-{schema}"
    async with bus(stream) as (base, nc, nats_pid):
        settings = base.model_copy(
            update={
                "database_url": with_application_name(url, app),
                "telemetry_batch_size": batch,
                "telemetry_writers": writers,
                "telemetry_pool_size": 4,
            }
        )
        js = nc.jetstream()
        # the service's consumer, paused until every writer process is up and pulling
        config = log_consumer_config(settings)
        until = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        await js.add_consumer(settings.stream_name, config=config, pause_until=until)
        service = create_service(settings, schema=schema)
        async with service.running():
            await service.runtime.ready.wait()
            while service.runtime.writers.started.value < writers - 1:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the service's own ingestor starts on ready
            await js.resume_consumer(settings.stream_name, LOG_DURABLE)
            # the clock starts with the schema migrated, the whole stream waiting, all writers up
            started, own_started = time.perf_counter(), time.process_time()
            nats_before = process_cpu_s(nats_pid) or 0.0
            server_before = await backends(service.runtime.db, app)
            pids = [p.pid for p in service.runtime.writers.processes if p.pid is not None]
            children_before = {pid: process_cpu_s(pid) or 0.0 for pid in pids}
            children: dict[int, float] = dict(children_before)
            while True:
                for pid in pids:
                    children[pid] = process_cpu_s(pid) or children[pid]
                with contextlib.suppress(Exception):
                    info = await js.consumer_info(settings.stream_name, LOG_DURABLE)
                    if info.ack_floor.stream_seq >= len(stream) and not info.num_ack_pending:
                        break
                await asyncio.sleep(0.02)
            elapsed = time.perf_counter() - started
            own = time.process_time() - own_started
            nats_cpu = (process_cpu_s(nats_pid) or 0.0) - nats_before
            server_after = await backends(service.runtime.db, app)
            writer_cpu = sum(children.values()) - sum(children_before.values())
            stored = (await service.runtime.db.fetch("SELECT count(*) FROM run_metrics"))[0][0]
            steps = (
                await service.runtime.db.fetch(
                    "SELECT count(*) FROM (SELECT DISTINCT job_id, step FROM run_metrics) s"
                )
            )[0][0]
            logged = (await service.runtime.db.fetch("SELECT count(*) FROM event_log"))[0][0]
            distinct = (
                await service.runtime.db.fetch("SELECT count(DISTINCT event_id) FROM event_log")
            )[0][0]
    server = sum(server_after.values()) - sum(
        cpu for pid, cpu in server_before.items() if pid in server_after
    )
    return {
        "elapsed_s": elapsed,
        "stored": stored,
        "steps": steps,
        "logged": logged,
        "distinct": distinct,
        "events": events,
        "client_cpu_s": round(own + writer_cpu, 2),
        "server_cpu_s": round(server, 2),
        "nats_cpu_s": round(nats_cpu, 2),
    }


async def insert_path(url: str, schema: str, stream: list[Message]) -> dict:
    """The baseline: one message at a time from the bus, parse, one INSERT per row in autocommit."""
    db = Database(url, schema=schema)
    await db.migrate()
    await db.close()
    async with bus(stream) as (settings, nc, _):
        js = nc.jetstream()
        sub = await js.pull_subscribe(
            "metatune.>", durable="bench-insert", stream=settings.stream_name
        )
        async with await psycopg.AsyncConnection.connect(
            url, autocommit=True, options=f"-c search_path={schema}"
        ) as conn:
            await conn.execute(
                "SELECT telemetry_ensure_partition('event_log', '2026-03-01'), "
                "telemetry_ensure_partition('run_metrics', '2026-03-01')"
            )
            started = time.perf_counter()
            done = 0
            while done < len(stream):
                for m in await sub.fetch(1, timeout=5.0):
                    await insert_one(conn, settings.stream_name, m)
                    await m.ack()
                    done += 1
            elapsed = time.perf_counter() - started
            stored = (await (await conn.execute("SELECT count(*) FROM run_metrics")).fetchone())[0]
            logged = (await (await conn.execute("SELECT count(*) FROM event_log")).fetchone())[0]
    return {"elapsed_s": elapsed, "stored": stored, "logged": logged}


async def insert_one(conn: psycopg.AsyncConnection, stream: str, m) -> None:
    e = catalog.parse(m.subject, m.data)  # the jobs' starts first, then their progress
    cur = await conn.execute(
        "INSERT INTO event_log (occurred_at, event_id, subject, correlation_id, stream, stream_seq, payload) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (
            e.occurred_at,
            e.event_id,
            m.subject,
            e.correlation_id,
            stream,
            m.metadata.sequence.stream,
            Jsonb(json.loads(m.data)),
        ),
    )
    if cur.rowcount == 1:
        rows = TypedRows()
        rows.add(e)  # the same typed rows the service writes, each inserted on its own
        for row in rows.run_metrics:
            await conn.execute(
                "INSERT INTO run_metrics (time, event_id, job_id, datacenter, step, total_steps, "
                "train_loss, val_loss, learning_rate, power_w, step_time_s, tokens_seen, "
                "tokens_with_padding, energy_wh) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                row,
            )


async def measure(
    url: str, points: int, events: int, baseline_events: int, args: argparse.Namespace
) -> dict:
    """Both paths over events that report ``points`` steps each; the baseline stores as many
    metric rows as ``baseline_events`` events of one step would."""
    stream, unique_events, unique = messages(events, 0.10, args.seed, points)
    small, small_events, small_unique = messages(
        max(1, baseline_events // points), 0.10, args.seed, points
    )
    schemas = [f"bench_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        load_before = os.getloadavg()[0]
        copy = await copy_path(url, schemas[0], stream, unique_events, args.batch, args.writers)
        load_after = os.getloadavg()[0]
        insert = await insert_path(url, schemas[1], small)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    copy_rate = copy["stored"] / copy["elapsed_s"]
    insert_rate = insert["stored"] / insert["elapsed_s"]
    whole = (
        copy["stored"] == copy["steps"] == unique
        and copy["logged"] == copy["distinct"] == unique_events
        and insert["stored"] == small_unique
        and insert["logged"] == small_events
    )
    if not whole:
        print(
            f"LOST OR DOUBLED ({points} a message): copy {copy}, insert {insert}", file=sys.stderr
        )
    cpu = copy["client_cpu_s"] + copy["server_cpu_s"] + copy["nats_cpu_s"]
    return {
        "copy_rows_per_s": round(copy_rate, 1),
        "insert_rows_per_s": round(insert_rate, 1),
        "speedup": round(copy_rate / insert_rate, 2),
        "stored": copy["stored"],
        "unique": unique,
        "lost_or_doubled": not whole,
        "points_per_event": points,
        "events_per_s": round(unique_events / copy["elapsed_s"], 1),
        "events": unique_events,
        "messages": len(stream),
        "batch": args.batch,
        "writers": args.writers,
        "copy_elapsed_s": round(copy["elapsed_s"], 2),
        "insert_stored": insert["stored"],
        "insert_unique": small_unique,
        "insert_messages": len(small),
        "client_cpu_s": copy["client_cpu_s"],
        "server_cpu_s": copy["server_cpu_s"],
        "nats_cpu_s": copy["nats_cpu_s"],
        "cpu_us_per_row": round(cpu / copy["stored"] * 1e6, 1) if copy["stored"] else None,
        "load_avg_1m": [round(load_before, 2), round(load_after, 2)],
        "cpus": os.cpu_count(),
    }


async def main(args: argparse.Namespace) -> dict:
    url = args.database_url or Settings().database_url
    points = args.points_per_event
    result = await measure(url, points, args.point_events, args.baseline_events, args)
    if points != 1:  # today's shape beside it: one step per event
        result["one_point_per_event"] = await measure(
            url, 1, args.events, args.baseline_events, args
        )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--points-per-event",
        type=int,
        default=100,
        help="optimizer steps each progress event reports (its own and the points it carries): "
        "the agent's 2 s progress interval x 50 steps/s",
    )
    parser.add_argument(
        "--point-events",
        type=int,
        default=5_000,
        help="unique events through the service when they carry points",
    )
    parser.add_argument(
        "--events",
        type=int,
        default=100_000,
        help="unique events through the service at one step per event",
    )
    parser.add_argument(
        "--baseline-events",
        type=int,
        default=5_000,
        help="metric rows through row-by-row INSERT (as events of one step)",
    )
    parser.add_argument("--batch", type=int, default=2000, help="messages per COPY batch")
    parser.add_argument(
        "--writers", type=int, default=2, help="processes storing the stream (telemetry_writers)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--database-url", default=None, help="default: METATUNE_DATABASE_URL")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    atexit.register(_reap)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    result = asyncio.run(main(args))
    if args.json:
        print(json.dumps(result))
    else:
        table = Table(
            title="telemetry ingestion from the bus, 10 % redelivered (metric rows stored per second)"
        )
        for col in ("path", "steps an event", "messages", "rows stored", "unique rows", "rows/s"):
            table.add_column(col, justify="right")
        runs = [result] + (
            [result["one_point_per_event"]] if "one_point_per_event" in result else []
        )
        for run in runs:
            table.add_row(
                f"service: COPY batches of {args.batch}, {args.writers} writer(s)",
                str(run["points_per_event"]),
                f"{run['messages']:,}",
                f"{run['stored']:,}",
                f"{run['unique']:,}",
                f"{run['copy_rows_per_s']:,.0f} ({run['events_per_s']:,.0f} events/s)",
            )
            table.add_row(
                "row-by-row INSERT",
                str(run["points_per_event"]),
                f"{run['insert_messages']:,}",
                f"{run['insert_stored']:,}",
                f"{run['insert_unique']:,}",
                f"{run['insert_rows_per_s']:,.0f}",
            )
        Console().print(table)
        for run in runs:
            Console().print(
                f"{run['points_per_event']} step(s) an event: speedup {run['speedup']:.1f}x; COPY "
                f"path CPU: client {run['client_cpu_s']} s, server {run['server_cpu_s']} s, nats "
                f"{run['nats_cpu_s']} s ({run['cpu_us_per_row']} µs a row); load average "
                f"{run['load_avg_1m']}"
            )
