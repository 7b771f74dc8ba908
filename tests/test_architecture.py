"""The architecture as a gate: import-linter's contracts (``.importlinter``) hold on the code.

No service imports another, the shared package imports no service, and domain code stays pure
(no adapters, bus, FastStream, database or HTTP client), so it is testable without a bus; no
module imports itself through others (``scripts/import_cycles.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a test dependency (requirements-dev.txt)"
    done = subprocess.run(
        [lint, "--config", str(ROOT / ".importlinter")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def _import_cycles(*packages: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(path)} if path else None
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "import_cycles.py"), *packages],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def test_no_import_cycles() -> None:
    done = _import_cycles()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 import cycles" in done.stdout


def test_the_cycle_check_finds_a_cycle_under_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import B\n\nclass A(B): ...\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .a import A\n\nclass B: ...\n"
    )
    (package / "c.py").write_text("from . import a\n")  # imports into the cycle, not part of it
    done = _import_cycles("cyclic", path=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "import cycle: cyclic.a <-> cyclic.b\n" in done.stdout
    assert "1 import cycles" in done.stdout


CLONE = """def summary(errors: list[dict[str, object]], shown: int = 5) -> str:
    parts = []
    for err in errors[:shown]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
        parts.append(f"{loc}: {err.get('msg')}")
    more = len(errors) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
"""


def _copy_paste_check(path: Path) -> subprocess.CompletedProcess[str]:
    jscpd = shutil.which("jscpd", path=str(Path(sys.executable).parent))
    assert jscpd, "jscpd is a development dependency (requirements-dev.txt)"
    return subprocess.run(
        [jscpd, "--config", str(ROOT / ".jscpd.json"), "--no-colors", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_copy_paste_check_fires_at_its_threshold(tmp_path: Path) -> None:
    """The thresholds of ``.jscpd.json`` (which scripts/check applies to shared and services)
    catch a seven-line function pasted under another name, and pass the function alone."""
    (tmp_path / "a.py").write_text(CLONE)
    alone = _copy_paste_check(tmp_path)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    (tmp_path / "b.py").write_text(CLONE.replace("def summary", "def digest"))
    pasted = _copy_paste_check(tmp_path)
    assert pasted.returncode == 1, pasted.stdout + pasted.stderr
    assert "Found 1 clones" in pasted.stdout
