"""``scripts/cpu_time.py`` (what ``scripts/test`` prints after pytest): a command's own CPU time,
the machine's, and the command's exit status passed through."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cpu_time.py"
BUSY = "import sys, time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\nsys.exit(3)"


def test_a_busy_command_s_cpu_is_counted_and_its_exit_status_kept() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--", sys.executable, "-c", BUSY],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    figures = json.loads(done.stderr.strip().splitlines()[-1])
    assert figures["returncode"] == 3
    assert figures["user_s"] + figures["sys_s"] >= 0.4  # the half second it spun, to the tick
    assert figures["machine_cpu_s"] + figures["niced_cpu_s"] >= 0.4  # the machine saw it too
    assert figures["wall_s"] >= 0.4 and figures["cpus"] >= 1


def test_without_a_command_it_says_how_to_call_it() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no command given" in done.stderr
