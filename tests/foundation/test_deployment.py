"""Static checks of what we cannot run here: the compose file (no Docker engine) and the AsyncAPI doc."""

from __future__ import annotations

from pathlib import Path

import yaml

from metatune.registry import default_registry
from metatune.settings import Settings, settings_field_names
from metatune_cli.asyncapi import CATALOG, render
from metatune_cli.platform import CORE_SERVICES
from metatune_cli.settings import CliSettings
from metatune_forecaster.settings import ForecasterSettings
from metatune_profiler.settings import ProfilerSettings
from metatune_scheduler.settings import SchedulerSettings
from metatune_telemetry.settings import TelemetrySettings
from metatune_trainer_agent.settings import AgentSettings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose" / "docker-compose.yml"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_every_build_context_dockerfile_and_config_file_exists() -> None:
    for name, service in compose()["services"].items():
        if "build" in service:
            context = (COMPOSE.parent / service["build"]["context"]).resolve()
            assert context.is_dir(), name
            assert (context / service["build"]["dockerfile"]).is_file(), (
                f"{name}: Dockerfile missing"
            )
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists(), f"{name}: {source} missing"


SETTINGS_OF_IMAGE = {  # what each image's process reads
    "metatune/profiler": ProfilerSettings,
    "metatune/recommender": Settings,
    "metatune/forecaster": ForecasterSettings,
    "metatune/scheduler": SchedulerSettings,
    "metatune/telemetry": TelemetrySettings,
    "metatune/trainer-agent": AgentSettings,
    "metatune/cli": CliSettings,
}


def test_service_environments_name_only_settings_their_process_reads() -> None:
    for name, service in compose()["services"].items():
        env = service.get("environment", {})
        ours = {key for key in env if key.startswith("METATUNE_")}
        if not ours:
            continue
        known = settings_field_names(SETTINGS_OF_IMAGE[service["image"]])
        assert ours <= known, f"{name}: settings its process does not read {ours - known}"
    # another service's setting is refused: the scheduler does not read telemetry's host
    assert "METATUNE_TELEMETRY_HTTP_HOST" not in settings_field_names(SchedulerSettings)


def test_every_service_and_three_datacenter_agents_are_deployed_with_healthchecks() -> None:
    services = compose()["services"]
    assert {"nats", "timescaledb"} <= set(services)
    assert services["timescaledb"]["image"].startswith("timescale/timescaledb")
    for name, _ in CORE_SERVICES:
        assert name in services
    agents = [s for s in services.values() if s.get("environment", {}).get("METATUNE_DATACENTER")]
    assert len(agents) >= 3
    registry = default_registry()
    for agent in agents:
        registry.get(agent["environment"]["METATUNE_DATACENTER"])
    one_shot = {
        name for name, service in services.items() if service.get("restart") == "no"
    }  # bus-init
    for name, service in services.items():
        assert name in one_shot or "healthcheck" in service, name
        for target, dependency in service.get("depends_on", {}).items():
            wanted = "service_completed_successfully" if target in one_shot else "service_healthy"
            assert dependency["condition"] == wanted, f"{name} -> {target}"


def test_asyncapi_document_is_up_to_date() -> None:
    committed = (REPO / "docs" / "asyncapi.json").read_text()
    assert committed == render(), (
        "docs/asyncapi.json is stale: run `python -m metatune_cli.asyncapi > docs/asyncapi.json`"
    )


def test_asyncapi_covers_every_subject_family() -> None:
    import json

    channels = {channel["address"] for channel in json.loads(render())["channels"].values()}
    assert {doc.subject for doc in CATALOG} <= channels
    assert len(CATALOG) == 17
