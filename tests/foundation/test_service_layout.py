"""Every service is laid out like the others (the scheduler is the model): its package root holds
``app.py`` (``create_service``: the bus wired to the domain, returning the ``Service``),
``__main__.py``, optional ``cli.py`` (its ``metatune`` commands) and ``settings.py`` (its own
settings class), and the subpackages ``domain/`` (pure), ``adapters/`` (bus, database, HTTP, files; the
runtime) and ``tools/`` (offline tools), with the non-Python folders ``data/`` and
``migrations/``; ``domain/`` imports nothing from its service's adapters, app or tools.

A service of several subsystems may split them into **wings** (telemetry's ``ingest/``,
``webhooks/``, ``api/``, ``disclosure/``, ``exports/``): a wing is a package holding only its own
``domain/`` and ``adapters/``, with the same rule: no wing's domain imports any adapters.

The files are read and parsed (``ast``), never imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"

MODULES = {"__init__.py", "__main__.py", "app.py", "cli.py", "settings.py"}
SUBPACKAGES = {"domain", "adapters", "tools"}
FOLDERS = {"data", "migrations"}  # package data and yoyo migrations, not Python packages
IGNORED = {"__pycache__"}
# Files a service may keep at its root beside the above (the test fails once one is gone, so an
# entry cannot outlive its file).
EXCEPTIONS: dict[str, set[str]] = {}
# What domain code must not import from its own service (``adapters`` at the root or in a wing).
IMPURE = ("adapters", "app", "tools")
WING = {"domain", "adapters"}


def service_packages() -> list[Path]:
    """Each service's import package: ``services/<name>/src/metatune_<name>`` (not its egg-info)."""
    return sorted(
        p for p in SERVICES.glob("*/src/metatune_*") if p.is_dir() and (p / "__init__.py").is_file()
    )


def misplaced(package: Path) -> list[str]:
    """The entries of ``package``'s root that the layout has no place for."""
    allowed = MODULES | EXCEPTIONS.get(package.name, set())
    wrong = []
    for entry in sorted(package.iterdir()):
        if entry.name in IGNORED:
            continue
        if entry.is_dir():
            is_package = (entry / "__init__.py").is_file()
            if not (
                (entry.name in SUBPACKAGES and is_package)
                or (entry.name in FOLDERS and not is_package)
                or is_wing(entry)
            ):
                wrong.append(f"{entry.name}/")
        elif entry.name not in allowed:
            wrong.append(entry.name)
    return wrong


def is_wing(folder: Path) -> bool:
    """A wing: a package of nothing but its ``domain/`` and ``adapters/`` packages."""
    entries = {e.name for e in folder.iterdir() if e.name not in IGNORED} - {"__init__.py"}
    return (
        (folder / "__init__.py").is_file()
        and entries == WING
        and all((folder / name / "__init__.py").is_file() for name in WING)
    )


def domain_folders(package: Path) -> list[Path]:
    """The service's ``domain/`` and each wing's."""
    wings = [e / "domain" for e in sorted(package.iterdir()) if e.is_dir() and is_wing(e)]
    return [package / "domain", *wings]


def imported_modules(path: Path, package: Path) -> list[str]:
    """The absolute names of the modules ``path`` (a module under ``package``) imports, relative
    imports resolved; ``from X import name`` also yields ``X.name``, which may be a submodule."""
    # the package a relative import starts from: the module's folder (for __init__.py too)
    here = list(path.relative_to(package.parent).parent.parts)
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names]
    return names


def impure_imports(path: Path, package: Path) -> list[str]:
    """The imports of ``path`` that reach its service's adapters (a wing's too), app or tools."""

    def impure(name: str) -> bool:
        parts = name.split(".")
        if parts[0] != package.name or len(parts) < 2:
            return False
        return parts[1] in IMPURE or (len(parts) > 2 and parts[2] == "adapters")

    return sorted({name for name in imported_modules(path, package) if impure(name)})


PACKAGES = service_packages()


def test_every_service_has_one_package() -> None:
    services = sorted(p.name for p in SERVICES.iterdir() if (p / "pyproject.toml").is_file())
    assert services, "no service found under services/"
    assert sorted(p.parents[1].name for p in PACKAGES) == services


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_package_root_holds_only_the_layouts_modules(package: Path) -> None:
    assert misplaced(package) == [], (
        "runtime code belongs in adapters/, pure code in domain/, offline tools in tools/"
    )
    for name in EXCEPTIONS.get(package.name, set()):
        assert (package / name).is_file(), f"{name} has moved: drop it from EXCEPTIONS"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_app_defines_create_service(package: Path) -> None:
    app = package / "app.py"
    assert app.is_file()
    tree = ast.parse(app.read_text(encoding="utf-8"), filename=str(app))
    (create,) = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "create_service"
    ]
    # one kind of thing everywhere: a Service typed by the runtime its handlers call into
    returns = create.returns
    assert isinstance(returns, ast.Subscript) and ast.unparse(returns.value) == "Service", (
        f"{package.name}: create_service returns {ast.unparse(returns) if returns else None}, "
        "not Service[<its runtime>]"
    )


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_domain_imports_no_adapter_app_or_tool(package: Path) -> None:
    modules = sorted(m for folder in domain_folders(package) for m in folder.rglob("*.py"))
    assert modules, f"{package.name} has no domain/"
    found = {
        str(m.relative_to(package)): impure_imports(m, package)
        for m in modules
        if impure_imports(m, package)
    }
    assert found == {}


@pytest.mark.parametrize(
    "line",
    [
        "from ..adapters.store import Store\n",
        "from .. import adapters\n",
        "from ..app import create_service\n",
        "from ..tools.train import train\n",
        "import metatune_example.adapters.store\n",
        "from metatune_example import app\n",
        "from metatune_example.tools import train\n",
        "def f():\n    from ..adapters import runtime\n",
        "from ..ingest.adapters.writer import EventWriter\n",
        "import metatune_example.api.adapters.http\n",
    ],
)
def test_the_check_catches_a_domain_import_of_the_service_edges(line: str, tmp_path: Path) -> None:
    package = tmp_path / "metatune_example"
    (package / "domain").mkdir(parents=True)
    module = package / "domain" / "rule.py"
    module.write_text(line, encoding="utf-8")
    assert impure_imports(module, package) != []


def test_the_check_allows_the_domain_its_own_modules_and_other_packages(tmp_path: Path) -> None:
    package = tmp_path / "metatune_example"
    (package / "domain" / "sub").mkdir(parents=True)
    module = package / "domain" / "sub" / "rule.py"
    module.write_text(
        "from . import other\nfrom .. import model\nfrom ..errors import Bad\n"
        "from metatune.contracts import Job\nimport numpy\nfrom metatune_example.domain import x\n"
        "from metatune_other.adapters import y\n",
        encoding="utf-8",
    )
    assert impure_imports(module, package) == []


def test_the_check_catches_a_stray_module_at_the_root(tmp_path: Path) -> None:
    package = tmp_path / "metatune_example"
    for name in ("domain", "adapters", "tools"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
    (package / "data").mkdir()
    for name in ("__init__.py", "app.py", "runtime.py"):
        (package / name).write_text("")
    (package / "knowledge").mkdir()
    (package / "knowledge" / "__init__.py").write_text("")
    (package / "migrations").mkdir()
    (package / "migrations" / "__init__.py").write_text("")
    assert misplaced(package) == ["knowledge/", "migrations/", "runtime.py"]


def test_a_wing_holds_only_its_domain_and_adapters(tmp_path: Path) -> None:
    package = tmp_path / "metatune_example"
    for name in ("domain", "adapters", "ingest/domain", "ingest/adapters", "api/domain", "extra"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
    for name in ("__init__.py", "app.py", "ingest/__init__.py", "api/__init__.py", "api/rules.py"):
        (package / name).write_text("")
    # a wing with a module beside its two folders, or without adapters/, is not a wing
    assert misplaced(package) == ["api/", "extra/"]
    assert domain_folders(package) == [package / "domain", package / "ingest" / "domain"]
