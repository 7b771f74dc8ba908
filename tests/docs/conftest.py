"""``scripts/render_docs.py`` is a script, not a package: the tests load it by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "render_docs.py"


@pytest.fixture(scope="session")
def render_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_docs", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["render_docs"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
