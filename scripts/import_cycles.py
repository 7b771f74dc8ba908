"""Fail on any import cycle between modules of our packages (``scripts/check`` runs it).

A cycle makes import order matter and hides a missing layer; imports under ``TYPE_CHECKING``
count too, since they state the same dependency. The import graph is grimp's (import-linter's
own); the cycles are its strongly connected components of more than one module.

    python scripts/import_cycles.py [package ...]   # default: shared, cli, every service, kb
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import grimp

PACKAGES = (
    "metatune",
    "metatune_cli",
    "metatune_profiler",
    "metatune_recommender",
    "metatune_forecaster",
    "metatune_scheduler",
    "metatune_telemetry",
    "metatune_trainer_agent",
    "metatune_kb",
)


def find_cycles(packages: Iterable[str]) -> list[list[str]]:
    """Each group of modules that import one another (directly or through each other), sorted."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    modules = graph.modules
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & modules) for m in modules}
    # Tarjan's algorithm, iterative (package graphs are deep enough to hit the recursion limit).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                child = edges[node][i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(cycles)


def main(argv: list[str]) -> int:
    packages = argv or list(PACKAGES)
    cycles = find_cycles(packages)
    for group in cycles:
        print("import cycle: " + " <-> ".join(group))
    print(f"{len(cycles)} import cycles in {', '.join(packages)}")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
