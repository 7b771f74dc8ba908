"""The suite's own layout rules: no test folder imports another, and no module imports a test
module (``test_*.py``); what folders share lives in ``tests/support`` (a pytest plugin and
helpers), what a folder's tests share in its own support modules, so a test can change without
breaking another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SUPPORT = "tests.support"


def imported(path: Path, source: str) -> list[str]:
    """Every module ``source`` (the text of ``path``) imports; relative imports resolved."""
    package = ["tests", *path.relative_to(TESTS).parent.parts]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            names.append(".".join([*base, *([node.module] if node.module else [])]))
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def foreign_imports(path: Path, source: str) -> list[str]:
    """The ``tests`` modules that ``source`` (the text of ``path``) imports from outside its own
    folder and ``tests/support``; relative imports are resolved against ``path``."""
    own = ".".join(["tests", *path.relative_to(TESTS).parent.parts])
    in_tests = [n for n in imported(path, source) if n == "tests" or n.startswith("tests.")]
    allowed = (SUPPORT + ".", own + ".") if own != "tests" else (SUPPORT + ".",)
    return [n for n in in_tests if n not in (SUPPORT, own) and not n.startswith(allowed)]


def imported_test_modules(path: Path, source: str) -> list[str]:
    """The test modules (``test_*``) that ``source`` (the text of ``path``) imports."""
    names = imported(path, source)
    return [n for n in names if n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_")]


def _modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "support" not in p.relative_to(TESTS).parts)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(TESTS)))
def test_a_test_folder_imports_only_itself_and_the_support_package(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert foreign_imports(path, source) == [], "share it through tests/support"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_module_imports_a_test_module(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert imported_test_modules(path, source) == [], "share it through a support module"


def test_the_check_catches_an_import_of_a_test_module() -> None:
    here = TESTS / "telemetry" / "test_example.py"
    assert imported_test_modules(here, "from .test_storage import incoming\n") == [
        "tests.telemetry.test_storage"
    ]
    assert imported_test_modules(here, "from .recording import incoming\n") == []


@pytest.mark.parametrize(
    "line",
    [
        "from ..trainer_agent.conftest import slice_of\n",
        "from tests.trainer_agent.conftest import slice_of\n",
        "import tests.foundation.samples\n",
    ],
)
def test_the_check_catches_an_import_from_another_folder(line: str) -> None:
    here = TESTS / "scheduler" / "test_example.py"
    assert foreign_imports(here, line) != []
    assert foreign_imports(here, "from .conftest import NOW\nfrom tests.support import x\n") == []
