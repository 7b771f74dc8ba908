from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from ..conftest import SHARED_DATA


@pytest.fixture
def text_data() -> Path:
    folder = SHARED_DATA / "text"
    if not folder.is_dir():
        pytest.skip(f"../shared/data/text not found at {folder}")
    return folder


def write_jsonl(path: Path, records: Iterable[dict]) -> Path:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path
