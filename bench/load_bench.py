"""Load benchmark of the scheduler through the real bus: N job submissions at a stated rate.

A real nats-server (one started here per run) and the real scheduler service in a process of
its own; N synthetic ``JobRequested`` events (real contracts: 1 GPU, 0.5-3 GPU-hours, deadlines
two to seven days out, EU / NA / APAC residency, spread over the homes) are published into
JetStream at ``--rate`` per second, after one synthetic flat-plus-daily-cycle forecast per grid
region of the registry. A plain subscriber records, per job, when it first appears in a decision
the scheduler published: an entry of a ``Plan``, its ``infeasible_jobs``, or an ``Assignment``.

Figures: submissions planned, throughput, submission -> decision latency p50 / p99, the
scheduler's full-solve count (``Runtime.solves``: with coalescing, a burst of events costs one
solve) and its fast-path decisions (``Runtime.placements``: new jobs placed into the current
plan's room every ``--fast-s``, between full solves). The baseline, in the same run on
``--baseline-submissions`` (default 300): the same scheduler with no debounce and no fast path
(a solve as soon as the previous one ends, close to one solve per event).

``--stress N`` runs N busy processes (a pure-Python loop each, at normal priority) beside the
platform for both runs, so the scheduler is measured with less CPU than the machine has. The
scheduler runs in a process of its own (its solver process beside it), the submitter and the
observer in this one; the figures add the scheduler process's CPU seconds (its event loop, user
+ system) beside the wall time, and full solves whose result was superseded while they ran
(``Runtime.superseded``).

    python bench/load_bench.py                       # 10,000 at 100/s, baseline 300
    python bench/load_bench.py --submissions 2000 --rate 50 --json
    python bench/load_bench.py --submissions 3000 --stress 2 --json

``--json`` prints one object: {"submitted", "planned", "p50_ms", "p99_ms", "solves", "fast_path_decisions", ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import nats
import numpy as np

from metatune import subjects
from metatune.clock import floor_hour
from metatune.contracts import (
    AgentStatus,
    Assignment,
    CarbonForecast,
    DatasetLocation,
    JobRequested,
    LoraConfig,
    Plan,
    RegionGroup,
    StudySpec,
    TaskType,
)
from metatune.registry import default_registry
from metatune_cli.embedded import servers
from metatune_cli.embedded.probe import nats_answers_sync
from metatune_scheduler.app import create_service
from metatune_scheduler.settings import SchedulerSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import print_json, stdout_to_stderr

GROUPS = [RegionGroup.EU, RegionGroup.NA, RegionGroup.APAC]
STREAM = SchedulerSettings().stream_name


@dataclass
class Result:
    label: str
    submitted: int
    planned: int
    seconds: float
    latencies_ms: list[float]
    solves: int
    placements: int = 0  # fast-path decisions (each places every job requested since the last)
    superseded: int = 0  # full solves whose result was stale when they ended: not applied
    cpu_s: float = 0.0  # CPU seconds of the scheduler's process (its event loop) during the run

    def row(self) -> dict:
        lat = np.asarray(self.latencies_ms)
        planned = lat.size > 0  # else the latencies are None (JSON has no NaN)
        return {
            "submitted": self.submitted,
            "planned": self.planned,
            "throughput_per_s": round(self.planned / self.seconds, 1) if self.seconds else None,
            "p50_ms": round(float(np.percentile(lat, 50)), 1) if planned else None,
            "p99_ms": round(float(np.percentile(lat, 99)), 1) if planned else None,
            "max_ms": round(float(lat.max()), 1) if planned else None,
            "solves": self.solves,
            "fast_path_decisions": self.placements,
            "superseded_solves": self.superseded,
            "wall_s": round(self.seconds, 1),
            "cpu_s": round(self.cpu_s, 1),
        }


def forecasts(now: datetime, seed: int) -> list[CarbonForecast]:
    rng = random.Random(seed)
    start = floor_hour(now)
    out = []
    for region in sorted({dc.region for dc in default_registry().datacenters}):
        level, swing = rng.uniform(50, 500), rng.uniform(0.1, 0.5)
        values = [
            level * (1 + swing * np.sin(2 * np.pi * (h + rng.random()) / 24)) for h in range(168)
        ]
        out.append(
            CarbonForecast(
                occurred_at=now,
                region=region,
                issued_at=now,
                start=start,
                model_version="load-bench",
                g_per_kwh=values,
                p10_g_per_kwh=[v * 0.8 for v in values],
                p90_g_per_kwh=[v * 1.2 for v in values],
            )
        )
    return out


def heartbeats(now: datetime) -> list[AgentStatus]:
    """One agent per datacenter of the registry, all its GPUs free (the agents' status as the
    scheduler hears it; the lease the bench sets outlasts the run)."""
    return [dc.idle_status(now) for dc in default_registry().datacenters]


def job(now: datetime, rng: random.Random) -> JobRequested:
    group = rng.choice(GROUPS)
    homes = [dc.name for dc in default_registry().in_group(group)]
    deadline = now + timedelta(hours=rng.randint(48, 168))
    spec = StudySpec(
        dataset=DatasetLocation(kind="object", ref="studies/load.jsonl"),
        task=TaskType.classification,
        base_model="all-MiniLM-L6-v2",
        deadline=deadline,
        region_group=group,
        home_datacenter=rng.choice(homes),
    )
    return JobRequested(
        occurred_at=now,
        job_id=uuid4(),
        study_id=uuid4(),
        trial_index=0,
        spec=spec,
        config=LoraConfig(),
        gpus=1,
        estimated_gpu_hours=rng.choice([0.5, 1.0, 2.0, 3.0]),
        power_kw=0.3,
        deadline=deadline,
    )


@dataclass(frozen=True)
class Platform:
    """The scheduler service in a process of its own (as in production: the submitters and the
    observer are elsewhere, so their CPU is not the scheduler's). ``ready``: replayed and
    listening; ``started``: the measured submissions begin (its counters and CPU time from here);
    ``stop``: it reports ``(solves, fast-path decisions, superseded solves, CPU s)`` on ``out``."""

    ready: Any
    started: Any
    stop: Any
    out: Any


def serve(url: str, debounce_s: float, fast_s: float | None, platform: Platform) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    async def main() -> None:
        settings = SchedulerSettings(
            nats_url=url,
            data_dir=Path(tempfile.mkdtemp(prefix="load-bench-")),
            heartbeat_s=1.0,
            agent_lease_s=3600,
        )
        service = create_service(settings=settings, debounce_s=debounce_s, fast_s=fast_s)
        async with service.running():
            runtime = service.runtime
            await asyncio.wait_for(runtime.ready.wait(), 60)
            platform.ready.set()
            while not platform.started.is_set():
                await asyncio.sleep(0.01)
            before = (runtime.solves, runtime.placements, runtime.superseded, time.process_time())
            while not platform.stop.is_set():
                await asyncio.sleep(0.05)
            after = (runtime.solves, runtime.placements, runtime.superseded, time.process_time())
            platform.out.put(tuple(a - b for a, b in zip(after, before, strict=True)))

    asyncio.run(main())


async def run_load(
    url: str,
    n: int,
    rate: float,
    debounce_s: float,
    label: str,
    seed: int,
    wait_s: float,
    fast_s: float | None = 0.05,
) -> Result:
    context = multiprocessing.get_context("spawn")
    platform = Platform(context.Event(), context.Event(), context.Event(), context.Queue())
    scheduler = context.Process(target=serve, args=(url, debounce_s, fast_s, platform))
    scheduler.start()
    nc = await nats.connect(url)
    sent: dict[UUID, float] = {}
    seen: dict[UUID, float] = {}

    def mark(job_ids) -> None:
        at = time.perf_counter()
        for job_id in job_ids:
            if job_id in sent and job_id not in seen:
                seen[job_id] = at

    async def on_plan(msg) -> None:
        plan = Plan.model_validate_json(msg.data)
        mark([entry.job_id for entry in plan.entries] + list(plan.infeasible_jobs))

    async def on_assignment(msg) -> None:
        mark([Assignment.model_validate_json(msg.data).job_id])

    await nc.subscribe(subjects.PLANS, cb=on_plan)
    await nc.subscribe(subjects.ASSIGNMENTS_ALL, cb=on_assignment)
    rng = random.Random(seed)
    try:
        if not await asyncio.to_thread(platform.ready.wait, 120):
            raise RuntimeError("the scheduler did not start within 120 s")
        js = nc.jetstream()
        now = datetime.now(UTC)  # the service's clock: real time (the settings' default)
        for forecast in forecasts(now, seed):
            await js.publish(
                subjects.forecasts(forecast.region),
                forecast.to_bytes(),
                stream=STREAM,
                headers={"Nats-Msg-Id": str(forecast.event_id)},
            )
        for status in heartbeats(now):  # capacity goes only to datacenters an agent reports
            await js.publish(subjects.agent_status(status.datacenter), status.to_bytes())
        events = [job(now, rng) for _ in range(n)]
        platform.started.set()
        begin = time.perf_counter()
        for i, event in enumerate(events):
            due = begin + i / rate
            if (delay := due - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            sent[event.job_id] = time.perf_counter()
            await js.publish(
                subjects.JOBS_REQUESTED,
                event.to_bytes(),
                stream=STREAM,
                headers={"Nats-Msg-Id": str(event.event_id)},
            )
        deadline = time.perf_counter() + wait_s
        while len(seen) < n and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)
        elapsed = (max(seen.values()) if seen else time.perf_counter()) - begin
        platform.stop.set()
        solves, placements, superseded, cpu = await asyncio.to_thread(platform.out.get, True, 60)
    finally:
        platform.stop.set()
        await nc.close()
        await asyncio.to_thread(scheduler.join, 30)
        if scheduler.is_alive():
            scheduler.terminate()
    latencies = [(seen[j] - sent[j]) * 1000 for j in seen]
    return Result(label, n, len(seen), elapsed, latencies, solves, placements, superseded, cpu)


def with_nats(run) -> Result:
    """Run one load against a fresh nats-server of its own (empty streams, nothing shared)."""
    import socket

    directory = Path(tempfile.mkdtemp(prefix="load-bench-nats-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{sock.getsockname()[1]}"
    proc = servers.start_nats(url, directory, directory)
    try:
        for _ in range(100):
            if nats_answers_sync(url, 0.5):
                break
            time.sleep(0.1)
        return asyncio.run(run(url))
    finally:
        proc.terminate()
        proc.wait(10)


def _busy() -> None:
    while True:
        pass


@contextmanager
def stress(n: int) -> Iterator[None]:
    """``n`` busy processes for as long as the block runs: other work on the machine."""
    context = multiprocessing.get_context("spawn")
    busy = [context.Process(target=_busy, daemon=True) for _ in range(n)]
    for process in busy:
        process.start()
    try:
        yield
    finally:
        for process in busy:
            process.terminate()
        for process in busy:
            process.join(10)


# long: the bench's protocol in order: start, load, measure, report
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=100.0, help="submissions per second")
    parser.add_argument(
        "--debounce-s", type=float, default=0.5, help="the scheduler's coalescing window"
    )
    parser.add_argument(
        "--fast-s",
        type=float,
        default=0.05,
        help="how long the fast path gathers new requests; negative: no fast path",
    )
    parser.add_argument("--baseline-submissions", type=int, default=300, help="0: no baseline")
    parser.add_argument(
        "--wait-s", type=float, default=120.0, help="how long to wait for the last plans"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stress", type=int, default=0, help="busy processes to run beside the platform"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    results = []
    load_before = os.getloadavg()[0]  # the machine's load says how much CPU the run was given
    # HiGHS prints a banner from native code
    with stdout_to_stderr(args.json), stress(args.stress):
        if args.baseline_submissions:
            results.append(
                with_nats(
                    lambda url: run_load(
                        url,
                        args.baseline_submissions,
                        args.rate,
                        0.0,
                        "baseline: no coalescing, no fast path",
                        args.seed + 1,
                        args.wait_s,
                        fast_s=None,
                    )
                )
            )
        fast_s = None if args.fast_s < 0 else args.fast_s
        label = f"coalescing {args.debounce_s:g} s" + (
            f", fast path {fast_s:g} s" if fast_s is not None else ""
        )
        main_result = with_nats(
            lambda url: run_load(
                url,
                args.submissions,
                args.rate,
                args.debounce_s,
                label,
                args.seed,
                args.wait_s,
                fast_s=fast_s,
            )
        )
        results.append(main_result)

    report = {
        **main_result.row(),
        "rate_per_s": args.rate,
        "stress_processes": args.stress,
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "baseline": results[0].row() if args.baseline_submissions else None,
    }
    if args.json:
        print_json(report)
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(
            title=f"scheduler under load: submissions at {args.rate:g}/s through NATS, "
            f"{args.stress} busy processes beside it; load average {report['load_avg_1m']}"
        )
        for column in (
            "run",
            "submitted",
            "planned",
            "throughput/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "solves",
            "fast-path decisions",
            "superseded",
            "wall s",
            "CPU s",
        ):
            table.add_column(column)
        for result in results:
            row = result.row()
            table.add_row(
                result.label,
                str(row["submitted"]),
                str(row["planned"]),
                str(row["throughput_per_s"]),
                str(row["p50_ms"]),
                str(row["p99_ms"]),
                str(row["max_ms"]),
                str(row["solves"]),
                str(row["fast_path_decisions"]),
                str(row["superseded_solves"]),
                str(row["wall_s"]),
                str(row["cpu_s"]),
            )
        Console().print(table)
    ok = main_result.planned == main_result.submitted
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
