from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def env_for(tmp_path: Path):
    def build(**overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")}
        env["METATUNE_DATA_DIR"] = str(tmp_path / "data")
        env.update(overrides)
        return env

    return build
