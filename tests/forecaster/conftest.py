from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from metatune.embedded import servers
from metatune.embedded.probe import nats_answers_sync
from metatune_forecaster.adapters.replay import ReplayData
from metatune_forecaster.domain.model import CarbonModel
from metatune_forecaster.resources import MODEL_PATH

from ..conftest import _wait, free_port


@pytest.fixture(scope="session")
def model() -> CarbonModel:
    return CarbonModel.load(MODEL_PATH)


@pytest.fixture(scope="session")
def replay() -> ReplayData:
    return ReplayData()


@pytest.fixture(scope="module")
def module_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A nats-server of this test module alone, so its streams and clock anchor start empty."""
    directory: Path = tmp_path_factory.mktemp("nats")
    url = f"nats://127.0.0.1:{free_port()}"
    proc: subprocess.Popen[bytes] = servers.start_nats(url, directory, directory)
    try:
        _wait(lambda: nats_answers_sync(url, 0.5), "forecaster test NATS")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
