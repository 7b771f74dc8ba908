"""MetaTune profiler: turns a submitted dataset into the meta-features the recommender learns from.

``profile_file``, ``ProfileOptions`` and ``ProfileResult`` are loaded on first use, so that the
``metatune`` CLI, which imports this package for its ``profile`` command, does not pay for
importing transformers on every command.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProfileOptions", "ProfileResult", "profile_file"]


def __getattr__(name: str) -> Any:
    if name == "profile_file":
        from .adapters import files

        return files.profile_file
    if name in __all__:
        from .domain import profile

        return getattr(profile, name)
    raise AttributeError(name)
