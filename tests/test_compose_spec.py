"""compose/docker-compose.yml against the Compose Specification's JSON schema (vendored in
compose/schema/, see its PROVENANCE.md): a misspelt key or a wrong type fails here, not at the
first `docker compose up` on a machine with Docker. The file's shared settings live once, in its
extension fields, so a service cannot drift from the others."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "compose" / "docker-compose.yml"
SCHEMA = REPO / "compose" / "schema" / "compose-spec.json"


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())  # resolves the `<<` merges
    return loaded


def _errors(document: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    # the schema says draft-07 by a URI jsonschema does not map (no trailing '#'): name it here
    assert "draft-07" in schema["$schema"]
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    found = sorted(validator.iter_errors(document), key=lambda error: error.json_path)
    return [f"{error.json_path}: {error.message}" for error in found]


def test_the_compose_file_is_valid_against_the_compose_specification() -> None:
    assert _errors(_compose()) == []


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        (("services", "profiler"), "restart_policy", "always"),  # not a service key
        (("services", "profiler", "healthcheck"), "start_perod", "30s"),  # misspelt
        (("services", "scheduler", "depends_on", "nats"), "condition", "service_ready"),
        ((), "secret", {}),  # a top-level key the specification does not have
    ],
)
def test_the_schema_rejects_what_compose_would_refuse(
    where: tuple[str, ...], key: str, value: object
) -> None:
    broken = copy.deepcopy(_compose())
    node = broken
    for step in where:
        node = node[step]
    node[key] = value
    assert _errors(broken), f"{'.'.join((*where, key))} = {value!r} was accepted"


def test_shared_settings_are_written_once_in_extension_fields() -> None:
    text = COMPOSE.read_text()
    compose = _compose()
    ours = [
        name
        for name, service in compose["services"].items()
        if service.get("image", "").startswith("metatune/")
    ]
    assert len(ours) >= 8  # five services and three datacenter agents
    for setting in ("METATUNE_DATABASE_URL:", "METATUNE_DATA_DIR:", "metatune.healthcheck"):
        assert text.count(setting) == 1, f"{setting} is repeated instead of shared"
    for name in ours:
        env = compose["services"][name]["environment"]
        assert env["METATUNE_DATABASE_URL"] == "postgresql://metatune@timescaledb:5432/metatune"
        assert compose["services"][name]["healthcheck"]["test"][0] == "CMD-SHELL", name


GPU = REPO / "compose" / "docker-compose.gpu.yml"


def _merged(base: Any, override: Any) -> Any:
    """Compose's merge of an override file, for what these files use: mappings merge key by key,
    anything else is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {
            key: _merged(base[key], value) if key in base else value
            for key, value in {**base, **override}.items()
        }
    return override


def test_the_gpu_override_gives_each_agent_its_own_gpus_on_the_cuda_image() -> None:
    base, gpu = _compose(), yaml.safe_load(GPU.read_text())
    merged = _merged(base, gpu)
    assert _errors(gpu) == [] and _errors(merged) == []
    agents = {
        name
        for name, service in base["services"].items()
        if service.get("image") == "metatune/trainer-agent"
    }
    assert set(gpu["services"]) == agents  # every agent, and only the agents
    given: list[str] = []
    for name in sorted(agents):
        assert "deploy" not in base["services"][name]  # the CPU default reserves no GPU
        service = merged["services"][name]
        assert service["image"] == "metatune/trainer-agent:cuda"
        assert service["build"]["dockerfile"] == "services/trainer-agent/Dockerfile"
        assert service["build"]["args"]["TORCH_VARIANT"].startswith("cu")
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        given += device["device_ids"]
        # the base file's settings and secrets survive the merge
        assert service["environment"]["METATUNE_DATACENTER"] == name.removeprefix("trainer-agent-")
        assert f"nats_{name.replace('-', '_')}" in service["secrets"]
    assert given and len(given) == len(set(given))  # no GPU reserved by two agents

    broken = copy.deepcopy(gpu)
    device = broken["services"]["trainer-agent-fra1"]["deploy"]["resources"]["reservations"]
    device["devices"][0]["capabilites"] = ["gpu"]  # misspelt: compose would refuse it
    assert _errors(broken)
