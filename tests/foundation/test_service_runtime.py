"""Every service's handlers call into one runtime adapter, ``service.runtime``, set by its
``create_service``; read before it is set, it names the service instead of answering None."""

from __future__ import annotations

from pathlib import Path

import pytest

from metatune.errors import ConfigurationError
from metatune.service import Service
from metatune.settings import Settings
from metatune_profiler.adapters.runtime import Profiler
from metatune_profiler.app import create_service as create_profiler
from metatune_scheduler.adapters.runtime import Runtime
from metatune_scheduler.app import create_service as create_scheduler
from metatune_trainer_agent.adapters.runtime import TrainerAgent
from metatune_trainer_agent.app import create_service as create_agent


def test_a_runtime_read_before_it_is_set_names_the_service() -> None:
    with pytest.raises(ConfigurationError, match="service bare has no runtime"):
        _ = Service("bare", settings=Settings()).runtime


def test_create_service_sets_the_runtime_its_handlers_call(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert isinstance(create_profiler(settings).runtime, Profiler)
    assert isinstance(create_scheduler(settings).runtime, Runtime)
    agent = create_agent("fra1", settings).runtime
    assert isinstance(agent, TrainerAgent) and agent.dc.name == "fra1"
