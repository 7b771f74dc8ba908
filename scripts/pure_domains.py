"""Fail on I/O in a service's ``domain/`` (``scripts/check`` runs it; tests/test_architecture.py too).

Domain code decides; files, devices, model files and waiting are the adapters' (they hand the
domain what they read, or a small port). Import-linter's ``domains-without-io`` contract keeps
the modules that only do I/O (``os``, ``gzip``, ``tarfile``, ``joblib``...) out of ``domain/``;
this script catches the calls a module-level rule cannot see, in the source's syntax tree:

* ``time.sleep`` (and ``sleep`` imported from ``time``), ``torch.save``, ``torch.load``; a
  ``.sleep()`` on anything (a port that waits, ``asyncio.sleep``): waiting is the adapters';
* the device: any call into ``torch.cuda`` (is it there, which one, synchronise, free its cache,
  its random generator) or ``torch.distributed`` (join a process group, broadcast, reduce), and
  wrapping a model in ``DistributedDataParallel`` / ``DataParallel`` (which talks to the other
  devices); placing tensors (``.to(device)``) is the maths' and stays, on the device the
  adapters chose. A module imported under another name is followed (``import
  torch.distributed as dist``, ``from torch.cuda import synchronize``);
* ``from_pretrained`` / ``save_pretrained`` on anything (a model, tokenizer or config file);
* the builtin ``open`` and the file methods of ``pathlib`` (read and write text or bytes, open,
  mkdir, touch, unlink, rmdir, iterdir, glob, stat, exists, is_file, is_dir; not ``rename``,
  which pandas shares);
* importing pyarrow's file readers (``pyarrow.parquet``, ``.dataset``, ``.fs``, ``.feather``,
  ``.orc``, ``.csv``); parsing bytes already read (``pyarrow.json`` on a buffer) stays pure.

    python scripts/pure_domains.py [folder ...]   # default: every services/ and kb/ domain/, wings' too
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_CALLS = {"time.sleep", "torch.save", "torch.load"}
DEVICE_MODULES = ("torch.cuda.", "torch.distributed.")
DEVICE_CALLS = {
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.DataParallel",
}
# on anything: model files, and waiting through a port (``resources.sleep``, ``asyncio.sleep``)
ANY_CALLS = {"from_pretrained", "save_pretrained", "sleep"}
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
    """Every service's ``domain/``, its wings' (``<wing>/domain``) and the knowledge base's."""
    globs = ("services/*/src/*/domain", "services/*/src/*/*/domain", "kb/src/*/domain")
    return sorted(p for g in globs for p in ROOT.glob(g) if p.is_dir())


def _imported_names(tree: ast.AST) -> dict[str, str]:
    """The dotted name each imported name stands for: ``dist`` -> ``torch.distributed`` for
    ``import torch.distributed as dist``, ``nap`` -> ``time.sleep`` for ``from time import sleep
    as nap``."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname: alias.name for alias in node.names if alias.asname}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {
                alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names
            }
    return names


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a name; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _called(dotted: str, imported: dict[str, str]) -> str | None:
    """What calling ``dotted`` does, if it is I/O: ``"I/O"`` or ``"device"``."""
    head, _, rest = dotted.partition(".")
    full = ".".join(filter(None, [imported.get(head, head), rest]))
    if full in MODULE_CALLS:
        return "I/O"
    if full.startswith(DEVICE_MODULES) or full in DEVICE_CALLS:
        return "device"
    return None


def _reader_import(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    else:
        return None
    found = [m for m in modules if m.startswith(FILE_READERS)]
    return f"imports {found[0]}" if found else None


def _call(node: ast.Call, imported: dict[str, str]) -> str | None:
    func = node.func
    if isinstance(func, ast.Name) and func.id in {"open", "sleep"}:  # sleep: a wait handed in
        return f"{func.id}()"
    dotted = _dotted(func)
    kind = _called(dotted, imported) if dotted else None
    if kind:
        return f"{dotted}()" + (" (device)" if kind == "device" else "")
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr in ANY_CALLS or func.attr in PATH_METHODS:
        return f".{func.attr}()"
    return None


def violations(path: Path, source: str) -> list[str]:
    """``path:line: what`` for each I/O or device call or file-reader import in ``source``."""
    tree = ast.parse(source, str(path))
    imported = _imported_names(tree)
    found = []
    for node in ast.walk(tree):
        what = _call(node, imported) if isinstance(node, ast.Call) else _reader_import(node)
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
