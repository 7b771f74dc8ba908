"""Fail on a function over 80 lines outside the tests, unless it says why (``scripts/check`` runs it).

A long function is usually several jobs in one; split it. Where one long body reads best (a
bench's linear protocol, a table of examples), the line above its ``def`` (or its decorators)
states why, in a comment that starts ``# long:``::

    # long: the protocol reads top to bottom, one step per block (see the module docstring)
    def run(args: Namespace) -> dict: ...

    python scripts/long_functions.py [folder ...]   # default: shared/src cli/src services kb/src bench scripts
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("shared/src", "cli/src", "services", "kb/src", "bench", "scripts")
MAX_LINES = 80
REASON = "# long:"


def python_files(folders: Iterable[Path]) -> Iterator[Path]:
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if "tests" not in path.relative_to(folder).parts:
                yield path


def long_functions(path: Path) -> Iterator[tuple[int, str, int]]:
    """(line, name, length) of each function in ``path`` over MAX_LINES without a stated reason."""
    source = path.read_text()
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        assert node.end_lineno is not None
        length = node.end_lineno - node.lineno + 1
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        above = lines[first - 2].strip() if first >= 2 else ""
        if length > MAX_LINES and not above.startswith(REASON):
            yield node.lineno, node.name, length


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or [ROOT / f for f in FOLDERS]
    findings = [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}: {name} is "
        f"{length} lines (over {MAX_LINES}): split it, or say why above it ({REASON} ...)"
        for path in python_files(folders)
        for line, name, length in long_functions(path)
    ]
    print("\n".join(findings) or f"no function over {MAX_LINES} lines without a stated reason")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
