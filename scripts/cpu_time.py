"""Run a command and say what it cost: wall time, its own CPU time and the machine's.

    .venv/bin/python scripts/cpu_time.py [--json] -- COMMAND [ARG...]

`/usr/bin/time` counts only the processes the command waits for; a platform the command starts in
the background (``metatune up``, the demo's servers) and the NATS and PostgreSQL servers it talks
to are left out. This script also reads the machine's CPU counters (Linux ``/proc/stat``) before
and after: ``machine_cpu_s`` is the time every process at normal priority spent on the CPUs,
``niced_cpu_s`` the time of niced processes (a background build run with ``nice``), kept apart so
that a command measured beside niced work is still measured. Load averages bracket the run.
Exits with the command's exit status.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

STAT = Path("/proc/stat")


def cpu_counters() -> tuple[float, float]:
    """Seconds of CPU time since boot, all CPUs: (normal priority, niced)."""
    fields = STAT.read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + system + irq + softirq) / ticks, nice / ticks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object on stderr")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: cpu_time.py -- COMMAND [ARG...]")
    load_before = os.getloadavg()[0]
    machine_before, niced_before = cpu_counters()
    start = time.monotonic()
    returncode = subprocess.call(command)
    wall = time.monotonic() - start
    machine_after, niced_after = cpu_counters()
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = {
        "wall_s": round(wall, 1),
        "user_s": round(own.ru_utime, 1),
        "sys_s": round(own.ru_stime, 1),
        "machine_cpu_s": round(machine_after - machine_before, 1),
        "niced_cpu_s": round(niced_after - niced_before, 1),
        "cpus": os.cpu_count(),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "returncode": returncode,
    }
    if args.json:
        print(json.dumps(figures), file=sys.stderr)
    else:
        print(
            f"{figures['wall_s']} s wall, {figures['user_s']} s user + {figures['sys_s']} s sys"
            f" (the command), {figures['machine_cpu_s']} CPU s at normal priority and"
            f" {figures['niced_cpu_s']} niced (the machine, {figures['cpus']} CPUs),"
            f" load {figures['load_before']} -> {figures['load_after']}",
            file=sys.stderr,
        )
    return returncode


if __name__ == "__main__":
    sys.exit(main())
