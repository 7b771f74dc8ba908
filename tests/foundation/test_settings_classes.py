"""Settings per service: the platform's ``Settings`` holds what every service and the CLI read;
each service's class adds only its own fields, under the same prefix. A service handed the
platform's settings keeps their values and reads its own from the environment."""

from __future__ import annotations

import importlib
from itertools import combinations
from pathlib import Path

import pytest

from metatune.settings import Settings
from metatune_profiler.settings import ProfilerSettings

CLASSES = [
    ("metatune_profiler.settings", "ProfilerSettings"),
    ("metatune_forecaster.settings", "ForecasterSettings"),
    ("metatune_scheduler.settings", "SchedulerSettings"),
    ("metatune_telemetry.settings", "TelemetrySettings"),
    ("metatune_trainer_agent.settings", "AgentSettings"),
    ("metatune_cli.settings", "CliSettings"),
]


def _own(cls: type[Settings]) -> set[str]:
    return set(cls.model_fields) - set(Settings.model_fields)


@pytest.fixture(scope="module")
def classes() -> list[type[Settings]]:
    return [getattr(importlib.import_module(module), name) for module, name in CLASSES]


def test_each_class_adds_its_own_fields_and_no_two_share_one(classes) -> None:
    for cls in classes:
        assert issubclass(cls, Settings) and _own(cls), cls.__name__
        assert cls.model_config["env_prefix"] == "METATUNE_"  # one environment for all
    for first, second in combinations(classes, 2):
        assert not _own(first) & _own(second), (first.__name__, second.__name__)


def test_the_platform_s_settings_hold_no_service_s_field(classes) -> None:
    services = set().union(*(_own(cls) for cls in classes))
    assert not services & set(Settings.model_fields)
    assert "profiler_sample_size" not in Settings.model_fields  # the check looks at real fields
    assert "profiler_sample_size" in ProfilerSettings.model_fields


def test_a_service_handed_the_platform_s_settings_reads_its_own_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("METATUNE_PROFILER_SAMPLE_SIZE", "77")
    base = Settings(nats_url="nats://127.0.0.1:1", data_dir=tmp_path)
    settings = ProfilerSettings.of(base)
    assert isinstance(settings, ProfilerSettings)
    assert settings.nats_url == base.nats_url and settings.data_dir == tmp_path  # kept
    assert settings.profiler_sample_size == 77  # its own, from the environment
    assert ProfilerSettings.of(settings) is settings  # its own class: as it is
    assert ProfilerSettings.of(None).profiler_sample_size == 77


def test_a_database_password_file_is_applied_once_through_the_conversion(tmp_path: Path) -> None:
    secret = tmp_path / "db.password"
    secret.write_text("s3cret:/@x\n")
    base = Settings(
        database_url="postgresql://metatune@db:5432/metatune", database_password_file=secret
    )
    assert ProfilerSettings.of(base).database_url == base.database_url
