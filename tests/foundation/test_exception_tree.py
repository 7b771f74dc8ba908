"""One exception tree: every exception class of ``metatune``, ``metatune_cli``, ``metatune_kb`` and
the services derives from ``MetaTuneError``, has a name no other class has, and is drawn in
``metatune.errors``' docstring exactly as it is declared (parent, the builtins it also derives
from)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from metatune import errors
from metatune.errors import MetaTuneError

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PACKAGES = sorted(p.parent.name for p in ROOT.glob("services/*/src/*/__init__.py"))
OUR_PACKAGES = frozenset({"metatune", "metatune_cli", "metatune_kb", *SERVICE_PACKAGES})
SKIPPED: list[str] = []  # modules whose optional extra is not installed here
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>\w+)(?: \(also (?P<also>\w+(?:, \w+)*)\))?: \S")
INDENT = 2  # spaces per level of the drawing


@dataclass(frozen=True)
class Drawn:
    name: str
    parent: str | None  # None: a root of its block
    also: frozenset[str]


def ours(module_name: str) -> bool:
    return module_name.split(".")[0] in OUR_PACKAGES


def import_everything() -> list[str]:
    """Import every module of our packages (not ``__main__``, which runs the CLI); a module whose
    optional third-party extra is not installed is skipped. Returns the skipped modules."""
    skipped: list[str] = []

    def load(name: str) -> None:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            if exc.name is None or ours(exc.name):
                raise  # a broken import of our own code is a failure, not a missing extra
            skipped.append(name)

    for package in sorted(OUR_PACKAGES):
        load(package)
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}.", onerror=load):
            if info.name.rsplit(".", 1)[-1] != "__main__":
                load(info.name)
    return skipped


def subclasses(cls: type) -> set[type]:
    found: set[type] = set(cls.__subclasses__())
    for sub in list(found):
        found |= subclasses(sub)
    return found


@pytest.fixture(scope="module")
def exceptions() -> list[type[BaseException]]:
    """Every exception class our packages define: at module level, or anywhere under the tree
    (the drawing test then fails on a class the walk missed: drawn but not found)."""
    SKIPPED.extend(import_everything())
    found: set[type[BaseException]] = set()
    for name, module in list(sys.modules.items()):
        if module is None or not ours(name):
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException):
                found.add(value)
    found |= subclasses(BaseException)
    return sorted((c for c in found if ours(c.__module__)), key=lambda c: c.__qualname__)


def drawn_blocks() -> list[list[Drawn]]:
    """The literal blocks (after a line ending in ``::``) of ``metatune.errors``' docstring."""
    assert errors.__doc__
    blocks: list[list[Drawn]] = []
    lines = errors.__doc__.splitlines()
    for start, line in enumerate(lines):
        if not line.endswith("::"):
            continue
        block: list[Drawn] = []
        stack: list[str] = []
        for text in lines[start + 1 :]:
            if not text.strip():
                continue
            if not text.startswith("    "):
                break
            entry = ENTRY.match(text[4:])
            assert entry, f"not 'Name[ (also Builtin, ...)]: one line' in the drawing: {text!r}"
            depth, rest = divmod(len(entry["indent"]), INDENT)
            assert not rest and depth <= len(stack), f"badly indented: {text!r}"
            stack[depth:] = [entry["name"]]
            also = frozenset(entry["also"].split(", ")) if entry["also"] else frozenset()
            block.append(Drawn(entry["name"], stack[depth - 1] if depth else None, also))
        blocks.append(block)
    return blocks


def test_every_exception_derives_from_metatune_error(
    exceptions: list[type[BaseException]],
) -> None:
    (tree,) = drawn_blocks()
    outside = sorted(c.__name__ for c in exceptions if not issubclass(c, MetaTuneError))
    assert not outside, (
        "outside the MetaTuneError tree: derive these from MetaTuneError (and the builtin callers "
        f"catch): {outside}"
    )
    assert [d.name for d in tree if d.parent is None] == ["MetaTuneError"]


def test_the_docstring_draws_exactly_the_classes_that_exist(
    exceptions: list[type[BaseException]],
) -> None:
    drawn = [d for block in drawn_blocks() for d in block]
    assert Counter(d.name for d in drawn).most_common(1)[0][1] == 1, "a class drawn twice"
    by_name = {c.__name__: c for c in exceptions}
    not_drawn = sorted(set(by_name) - {d.name for d in drawn})
    gone = sorted({d.name for d in drawn} - set(by_name))
    assert not not_drawn, f"not drawn in metatune.errors' docstring: {not_drawn}"
    assert not gone or SKIPPED, f"drawn but gone: {gone}"  # else in a module not importable here
    for d in (d for d in drawn if d.name in by_name):
        bases = {b.__name__ for b in by_name[d.name].__bases__}
        if d.name == MetaTuneError.__name__:
            assert bases == {"Exception"}
            continue
        assert d.parent is None or d.parent in bases, f"{d.name} is drawn under {d.parent}"
        assert d.also == bases - {d.parent}, f"{d.name} derives from {sorted(bases)}"


def test_no_two_exception_classes_share_a_name(exceptions: list[type[BaseException]]) -> None:
    names = Counter(c.__name__ for c in exceptions)
    shared = {
        name: sorted(f"{c.__module__}.{c.__qualname__}" for c in exceptions if c.__name__ == name)
        for name, count in names.items()
        if count > 1
    }
    assert not shared, f"one name per failure: {shared}"
