from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from metatune.contracts import LoraConfig, TaskType
from metatune_trainer_agent.domain.request import TrainingRequest, TrainOptions
from metatune_trainer_agent.domain.run import Site

from ..conftest import SHARED_DATA

FAST_SITE = Site(idle_seconds=0.05)


def slice_of(name: str, rows: int, path: Path) -> Path:
    """The first ``rows`` rows of a shared dataset, written as plain JSON lines."""
    source = SHARED_DATA / "text" / name
    if not source.is_file():
        pytest.skip(f"{source} not found")
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for _, line in zip(range(rows), fh, strict=False)]
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trainer-data")


@pytest.fixture(scope="session")
def trec(data_dir: Path) -> Path:
    return slice_of("trec6.jsonl.gz", 200, data_dir / "trec6.jsonl")


@pytest.fixture(scope="session")
def sst2(data_dir: Path) -> Path:
    return slice_of("sst2.jsonl.gz", 96, data_dir / "sst2.jsonl")


@pytest.fixture(scope="session")
def snli(data_dir: Path) -> Path:
    return slice_of("snli_subset.jsonl.gz", 64, data_dir / "snli.jsonl")


@pytest.fixture(scope="session")
def shakespeare(data_dir: Path) -> Path:
    return slice_of("lm_tiny_shakespeare.jsonl.gz", 64, data_dir / "shakespeare.jsonl")


def request_for(
    dataset: Path,
    task: TaskType = TaskType.classification,
    *,
    cache: Path | None = None,
    **config: object,
) -> TrainingRequest:
    values: dict[str, object] = {
        "batch_size": 8,
        "max_seq_length": 32,
        "learning_rate": 3e-3,
        "max_steps": 4,
    }
    values.update(config)
    return TrainingRequest(
        dataset=dataset,
        task=task,
        base_model="all-MiniLM-L6-v2",
        config=LoraConfig.model_validate(values),
        options=TrainOptions(cache_dir=cache, eval_every=5),
    )


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "cache"
