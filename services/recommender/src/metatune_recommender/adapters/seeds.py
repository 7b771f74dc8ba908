"""The seed knowledge bases shipped in this package, where they lie (no bus, no database: what
``metatune recommend`` imports to read them)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# The seed knowledge bases shipped in this package (each built by ``metatune kb build``, with its
# own run-id prefix): the first seed (64 steps on the CPU), the second (2 epochs of 800 rows on
# the CPU), the GPU seed (2 epochs of 1,500 rows) and seed v3 (a study's default budget, 3 epochs
# of 1,000 rows, on 21 datasets). Each row records its budget and hardware, which the recommender
# takes as inputs.
SEED_RESOURCES = (
    "data/seed_kb.jsonl",
    "data/seed_kb_v2.jsonl",
    "data/seed_kb_gpu.jsonl",
    "data/seed_kb_v3.jsonl",
)


def seed_paths() -> list[Path]:
    """The shipped seed knowledge-base files, in :data:`SEED_RESOURCES` order."""
    root = resources.files("metatune_recommender")
    return [Path(str(root.joinpath(name))) for name in SEED_RESOURCES]


def seed_path() -> Path:
    """The first shipped seed (its header's budget is the brain bench's default)."""
    return seed_paths()[0]


__all__ = ["SEED_RESOURCES", "seed_path", "seed_paths"]
