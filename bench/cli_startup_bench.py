"""How long the ``metatune`` CLI takes to answer, and how much memory it takes, when it only lists.

Times ``metatune --version``, ``metatune --help``, ``metatune submit --help`` (a command's own help:
it loads that command and the contracts its options name, not the bus client) and one Tab
completion of the top-level command
(bash: ``_METATUNE_COMPLETE=complete_bash``), each a fresh process (the installed ``metatune``
script beside this Python, else the same import through ``python -c``), the median of ``--runs``
after one unmeasured warm-up, with each run's peak resident memory (``os.wait4``). The baseline,
``eager_import_s``, is a process that imports every command module, core and plugin (the entry
points of ``metatune_cli.cli`` and ``metatune_cli.cli.kb``): what each of these cost before the CLI loaded
its commands lazily.

    python bench/cli_startup_bench.py [--runs 5] [--json]

On a shared machine the load average says how much CPU the runs were given; it is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import benchkit
from benchkit import print_json
from rich.console import Console
from rich.table import Table

SCRIPT = Path(sys.executable).with_name("metatune")
# what the installed script does, for an environment without it
LAUNCHER = [
    sys.executable,
    "-c",
    "from metatune_cli.cli.main import app; app(prog_name='metatune')",
]
COMPLETION = {"_METATUNE_COMPLETE": "complete_bash", "COMP_WORDS": "metatune ", "COMP_CWORD": "1"}
EAGER = """
from importlib.metadata import entry_points
from metatune_cli.cli.main import CORE
for spec in CORE.values():
    spec.load()
for group in ("metatune.cli", "metatune.cli.kb"):
    for ep in entry_points(group=group):
        ep.load()
"""


def metatune(*args: str) -> list[str]:
    return [str(SCRIPT), *args] if SCRIPT.exists() else [*LAUNCHER, *args]


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, peak resident MB and CPU seconds (user + system, which load does not change)
    of one process (``wait4`` reports that child alone)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed: {err.decode(errors='replace')}")
    return elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime  # KiB on Linux


def measure(argv: list[str], runs: int, **env: str) -> tuple[float, float, float]:
    """Median seconds, the largest peak resident MB and the median CPU seconds of ``runs`` runs,
    after one warm-up."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("_METATUNE_")}
    environment.update(env)
    run_once(argv, environment)  # file cache and bytecode, as on a used machine
    results = [run_once(argv, environment) for _ in range(runs)]
    return (
        statistics.median(t for t, _, _ in results),
        max(m for _, m, _ in results),
        statistics.median(c for _, _, c in results),
    )


def machine() -> dict:
    """Where and when it was measured, and how busy the machine was."""
    return {
        **benchkit.machine(),
        "python": platform.python_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="measured runs per command (median)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    where = machine()
    version_s, version_mb, version_cpu = measure(metatune("--version"), args.runs)
    help_s, help_mb, help_cpu = measure(metatune("--help"), args.runs, COLUMNS="120")
    submit_s, submit_mb, submit_cpu = measure(
        metatune("submit", "--help"), args.runs, COLUMNS="120"
    )
    completion_s, completion_mb, completion_cpu = measure(metatune(), args.runs, **COMPLETION)
    eager_s, eager_mb, eager_cpu = measure([sys.executable, "-c", EAGER], args.runs)
    report = {
        "version_s": round(version_s, 3),
        "help_s": round(help_s, 3),
        "submit_help_s": round(submit_s, 3),
        "completion_s": round(completion_s, 3),
        "cpu_s": {
            "version": round(version_cpu, 3),
            "help": round(help_cpu, 3),
            "submit_help": round(submit_cpu, 3),
            "completion": round(completion_cpu, 3),
            "eager_import": round(eager_cpu, 3),
        },
        "peak_rss_mb": round(max(version_mb, help_mb, completion_mb), 1),
        "rss_mb": {
            "version": round(version_mb, 1),
            "help": round(help_mb, 1),
            "submit_help": round(submit_mb, 1),
            "completion": round(completion_mb, 1),
        },
        "eager_import_s": round(eager_s, 3),
        "eager_rss_mb": round(eager_mb, 1),
        "runs": args.runs,
        "launcher": "script" if SCRIPT.exists() else "python -c",
        "machine": where,
        "load_avg_1m_end": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print_json(report)
        return
    table = Table(title=f"metatune startup, median of {args.runs} runs")
    for column in ("command", "seconds", "CPU seconds", "peak RSS (MB)"):
        table.add_column(column, justify="left" if column == "command" else "right")
    rows = (
        ("metatune --version", version_s, version_cpu, version_mb),
        ("metatune --help", help_s, help_cpu, help_mb),
        ("metatune submit --help", submit_s, submit_cpu, submit_mb),
        ("completion: metatune <Tab>", completion_s, completion_cpu, completion_mb),
        ("baseline: import every command", eager_s, eager_cpu, eager_mb),
    )
    for name, seconds, cpu, mb in rows:
        table.add_row(name, f"{seconds:.2f}", f"{cpu:.2f}", f"{mb:.0f}")
    Console().print(table)
    load = where["load_avg"]
    print(f"{where['host_cpus']} CPUs, load average {load[0]} at the start, {where['at']}")


if __name__ == "__main__":
    main()
