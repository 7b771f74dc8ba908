"""The trainer's tests run real tiny trainings on small text datasets the repository ships (tests/support/data)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trainer-data")


@pytest.fixture(scope="session")
def intents(data_dir: Path, text_slice) -> Path:
    return text_slice("intents.jsonl.gz", 200, data_dir / "intents.jsonl")


@pytest.fixture(scope="session")
def intents_binary(data_dir: Path, text_slice) -> Path:
    return text_slice("intents_binary.jsonl.gz", 96, data_dir / "intents_binary.jsonl")


@pytest.fixture(scope="session")
def snli(data_dir: Path, text_slice) -> Path:
    return text_slice("snli_subset.jsonl.gz", 64, data_dir / "snli.jsonl")


@pytest.fixture(scope="session")
def shakespeare(data_dir: Path, text_slice) -> Path:
    return text_slice("lm_tiny_shakespeare.jsonl.gz", 64, data_dir / "shakespeare.jsonl")


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "cache"
