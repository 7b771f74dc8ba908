"""Running the ``metatune`` CLI as a user would: a separate process, its output captured."""

from __future__ import annotations

import subprocess
import sys

METATUNE = [sys.executable, "-m", "metatune_cli.cli"]


def run(
    args: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*METATUNE, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
