from __future__ import annotations

import pytest

from metatune_forecaster.adapters.model_files import load_model
from metatune_forecaster.adapters.package_data import MODEL_PATH
from metatune_forecaster.adapters.replay import ReplayData
from metatune_forecaster.domain.model import CarbonModel
from tests.support.secured_bus import admin, secured  # noqa: F401 (fixtures)
from tests.support.servers import free_port


@pytest.fixture(scope="session")
def model() -> CarbonModel:
    return load_model(MODEL_PATH)


@pytest.fixture(scope="session")
def replay() -> ReplayData:
    return ReplayData()


@pytest.fixture
def database_down(monkeypatch: pytest.MonkeyPatch) -> int:
    """The database URL at a free port where nothing listens (half a second to connect): the
    port, which the error must name."""
    port = free_port()
    monkeypatch.setenv("METATUNE_DATABASE_URL", f"postgresql://postgres@127.0.0.1:{port}/metatune")
    monkeypatch.setenv("METATUNE_CONNECT_TIMEOUT_S", "0.5")
    return port
