from __future__ import annotations

import pytest

from metatune_forecaster.adapters.model_files import load_model
from metatune_forecaster.adapters.package_data import MODEL_PATH
from metatune_forecaster.adapters.replay import ReplayData
from metatune_forecaster.domain.model import CarbonModel
from tests.support.secured_bus import admin, secured  # noqa: F401 (fixtures)


@pytest.fixture(scope="session")
def model() -> CarbonModel:
    return load_model(MODEL_PATH)


@pytest.fixture(scope="session")
def replay() -> ReplayData:
    return ReplayData()
