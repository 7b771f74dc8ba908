"""No function outside the tests is over 80 lines unless the line above it says why
(``scripts/long_functions.py``, in ``scripts/check``): shown to catch a planted one, to accept a
stated reason, and to pass on the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE = [sys.executable, str(ROOT / "scripts" / "long_functions.py")]


def body(lines: int) -> str:
    return "".join(f"    x{i} = {i}\n" for i in range(lines - 1))


def test_a_long_function_is_found_and_a_stated_reason_accepted(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text(
        "def short():\n" + body(80) + "\n\nclass A:\n    @staticmethod\n    def long():\n"
        "    " + body(81).replace("\n    ", "\n        ")
    )
    (tmp_path / "said.py").write_text("# long: a table read as data\ndef table():\n" + body(90))
    found = subprocess.run([*GATE, str(tmp_path)], capture_output=True, text=True, check=False)
    assert found.returncode == 1, found.stdout
    assert found.stdout.splitlines() == [
        f"{tmp_path / 'long.py'}:85: long is 81 lines (over 80): split it, or say why above it "
        "(# long: ...)"
    ]


def test_the_code_has_no_long_function_without_a_reason() -> None:
    result = subprocess.run(GATE, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
