"""``scripts/install`` installs nothing outside the repository unless asked: the two system-wide
tools (Chromium, the AsyncAPI CLI) only with ``--system-tools`` and as root, each said before it
is done, and ``scripts/test`` (CI) asks, so no test skips there. Run against stand-ins for
``apt-get``, ``npm`` and ``id`` on a PATH without the tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install-system-tools"


def run(tmp_path: Path, *, opted_in: bool, uid: int) -> tuple[str, list[str]]:
    """The script's output and the commands it ran (``apt-get ...``, ``npm ...``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for name in ("apt-get", "npm"):
        stand_in = bin_dir / name
        stand_in.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n')
        stand_in.chmod(0o755)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "id").chmod(0o755)
    env = {"PATH": str(bin_dir), "METATUNE_INSTALL_SYSTEM_TOOLS": "1" if opted_in else "0"}
    result = subprocess.run(
        ["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    ran = calls.read_text().splitlines() if calls.exists() else []
    return result.stdout, ran


@pytest.mark.parametrize(("opted_in", "uid"), [(False, 0), (True, 1000)])
def test_without_the_option_or_as_a_user_nothing_is_installed_and_it_says_so(
    tmp_path: Path, opted_in: bool, uid: int
) -> None:
    out, ran = run(tmp_path, opted_in=opted_in, uid=uid)
    assert ran == []
    assert out.startswith("not installed: chromium asyncapi") and "--system-tools" in out


def test_asked_as_root_it_says_what_it_installs_and_why_then_does(tmp_path: Path) -> None:
    out, ran = run(tmp_path, opted_in=True, uid=0)
    assert ran == [
        "apt-get update -qq",
        "apt-get install -y -qq chromium",
        "npm install -g -s @asyncapi/cli@4.1.1",
    ]
    assert out.splitlines() == [
        "installing Debian's chromium system-wide (apt-get, as root) for the dashboard's browser test",
        "installing @asyncapi/cli@4.1.1 system-wide (npm install -g, as root) to validate "
        "docs/asyncapi.json",
    ]


def test_the_test_command_ci_runs_asks_for_them() -> None:
    assert "./scripts/install --system-tools\n" in (REPO / "scripts" / "test").read_text()
