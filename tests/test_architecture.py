"""The architecture as a gate: import-linter's contracts (``.importlinter``) hold on the code.

No service imports another, the shared package imports no service, and domain code stays pure
(no adapters, bus, FastStream, database or HTTP client), so it is testable without a bus.
"""

from __future__ import annotations

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
