"""Running the ``metatune`` CLI as a user would: a separate process, its output captured."""

from __future__ import annotations

import re
import subprocess
import sys

METATUNE = [sys.executable, "-m", "metatune_cli.cli"]


def run(
    args: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*METATUNE, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def fits(text: str) -> None:
    """A table as the compact layout prints it: every line within 80 columns, no cell cut to
    '…', never six zeros, no fractions of a second."""
    lines = text.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert "…" not in text and "0.000000" not in text, text
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", text), text  # no fractions of a second
