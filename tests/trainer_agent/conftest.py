"""The trainer's tests run real tiny trainings on slices of the shared text datasets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trainer-data")


@pytest.fixture(scope="session")
def trec(data_dir: Path, text_slice) -> Path:
    return text_slice("trec6.jsonl.gz", 200, data_dir / "trec6.jsonl")


@pytest.fixture(scope="session")
def sst2(data_dir: Path, text_slice) -> Path:
    return text_slice("sst2.jsonl.gz", 96, data_dir / "sst2.jsonl")


@pytest.fixture(scope="session")
def snli(data_dir: Path, text_slice) -> Path:
    return text_slice("snli_subset.jsonl.gz", 64, data_dir / "snli.jsonl")


@pytest.fixture(scope="session")
def shakespeare(data_dir: Path, text_slice) -> Path:
    return text_slice("lm_tiny_shakespeare.jsonl.gz", 64, data_dir / "shakespeare.jsonl")


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "cache"
