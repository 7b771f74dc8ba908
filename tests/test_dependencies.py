"""deptry on shared, the tools package (cli), each service and the knowledge base (kb) (configured by ``[tool.deptry]`` in its pyproject.toml,
the same run as scripts/deps): every import is declared in the package that makes it, and nothing
is declared that the package does not import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = [
    REPO / "shared",
    REPO / "cli",
    *sorted(p.parent for p in REPO.glob("services/*/pyproject.toml")),
    REPO / "kb",
]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda path: path.name)
def test_the_package_declares_what_it_imports_and_nothing_else(package: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "deptry", ".", "--no-ansi"],
        cwd=package,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_undeclared_import_is_reported(tmp_path: Path) -> None:
    """The same run on a copy of the scheduler with one planted import it does not declare."""
    copy = tmp_path / "scheduler"
    shutil.copytree(
        REPO / "services" / "scheduler",
        copy,
        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
    )
    (copy / "src" / "metatune_scheduler" / "planted.py").write_text("import yaml\n")
    run = subprocess.run(
        [sys.executable, "-m", "deptry", ".", "--no-ansi"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = run.stdout + run.stderr
    assert run.returncode != 0
    assert "planted.py:1:8: DEP003 'yaml'" in report
    assert "Found 1 dependency issue." in report, report
