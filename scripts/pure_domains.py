"""Fail on I/O in a service's ``domain/`` (``scripts/check`` runs it; tests/test_architecture.py too).

Domain code decides; files, devices, model files and waiting are the adapters' (they hand the
domain what they read, or a small port). Import-linter's ``domains-without-io`` contract keeps
the modules that only do I/O (``os``, ``gzip``, ``tarfile``, ``joblib``...) out of ``domain/``;
this script catches the calls a module-level rule cannot see, in the source's syntax tree:

* ``time.sleep`` (and ``sleep`` imported from ``time``), ``torch.save``, ``torch.load``;
* ``from_pretrained`` / ``save_pretrained`` on anything (a model, tokenizer or config file);
* the builtin ``open`` and the file methods of ``pathlib`` (read and write text or bytes, open,
  mkdir, touch, unlink, rmdir, iterdir, glob, stat, exists, is_file, is_dir; not ``rename``,
  which pandas shares);
* importing pyarrow's file readers (``pyarrow.parquet``, ``.dataset``, ``.fs``, ``.feather``,
  ``.orc``, ``.csv``); parsing bytes already read (``pyarrow.json`` on a buffer) stays pure.

    python scripts/pure_domains.py [folder ...]   # default: services/*/src/*/domain
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_CALLS = {("time", "sleep"), ("torch", "save"), ("torch", "load")}
ANY_CALLS = {"from_pretrained", "save_pretrained"}
PATH_METHODS = {
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "open",
    "mkdir",
    "touch",
    "unlink",
    "rmdir",
    "iterdir",
    "glob",
    "rglob",
    "stat",
    "exists",
    "is_file",
    "is_dir",
}
FILE_READERS = (
    "pyarrow.parquet",
    "pyarrow.dataset",
    "pyarrow.fs",
    "pyarrow.feather",
    "pyarrow.orc",
    "pyarrow.csv",
)


def domain_folders() -> list[Path]:
    return sorted(ROOT.glob("services/*/src/*/domain"))


def _imported_calls(tree: ast.AST) -> set[str]:
    """Names bound by ``from time import sleep`` / ``from torch import save, load``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in {"time", "torch"}:
            names |= {
                alias.asname or alias.name
                for alias in node.names
                if (node.module, alias.name) in MODULE_CALLS
            }
    return names


def _reader_import(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    else:
        return None
    found = [m for m in modules if m.startswith(FILE_READERS)]
    return f"imports {found[0]}" if found else None


def _call(node: ast.Call, bare: set[str]) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        if func.id == "open":
            return "open()"
        return f"{func.id}()" if func.id in bare else None
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and (func.value.id, func.attr) in MODULE_CALLS:
        return f"{func.value.id}.{func.attr}()"
    if func.attr in ANY_CALLS or func.attr in PATH_METHODS:
        return f".{func.attr}()"
    return None


def violations(path: Path, source: str) -> list[str]:
    """``path:line: what`` for each I/O call or file-reader import in ``source``."""
    tree = ast.parse(source, str(path))
    bare = _imported_calls(tree)
    found = []
    for node in ast.walk(tree):
        what = _call(node, bare) if isinstance(node, ast.Call) else _reader_import(node)
        if what:
            found.append((node.lineno, what))  # type: ignore[attr-defined]
    return [f"{_shown(path)}:{line}: {what}" for line, what in sorted(found)]


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def check(folders: Iterable[Path]) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            found += violations(path, path.read_text(encoding="utf-8"))
    return found


def main(argv: list[str]) -> int:
    found = check([Path(a) for a in argv] or domain_folders())
    for line in found:
        print(line)
    print(f"{len(found)} I/O calls in domain code")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
