"""compose/docker-compose.yml against the Compose Specification's JSON schema (vendored in
compose/schema/, see its PROVENANCE.md): a misspelt key or a wrong type fails here, not at the
first `docker compose up` on a machine with Docker. The file's shared settings live once, in its
extension fields, so a service cannot drift from the others."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from metatune.dashboard_tokens import PREVIOUS_FILE, TOKEN_FILE
from metatune_telemetry.api.adapters.auth import is_loopback
from metatune_telemetry.api.adapters.metrics import Snapshot, families
from tests.support.storage import POSTGRES_MAJOR, TIMESCALEDB_VERSION

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
        and service["image"] != "metatune/cli"  # bus-init, a one-shot of the tools' image
    ]
    assert len(ours) >= 8  # five services and three datacenter agents
    for setting in ("METATUNE_DATABASE_URL:", "METATUNE_DATA_DIR:", "metatune.healthcheck"):
        assert text.count(setting) == 1, f"{setting} is repeated instead of shared"
    for name in ours:
        env = compose["services"][name]["environment"]
        assert env["METATUNE_DATABASE_URL"] == "postgresql://metatune@timescaledb:5432/metatune"
        assert compose["services"][name]["healthcheck"]["test"][0] == "CMD-SHELL", name


def test_timescaledb_is_pinned_to_the_version_telemetrys_tests_run_against() -> None:
    image = _compose()["services"]["timescaledb"]["image"]
    assert image == f"timescale/timescaledb:{TIMESCALEDB_VERSION}-pg{POSTGRES_MAJOR}"


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
        assert service["build"]["dockerfile"] == "Dockerfile"
        assert service["build"]["target"] == "trainer-agent"
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


PROMETHEUS = REPO / "compose" / "prometheus" / "prometheus.yml"
GRAFANA = REPO / "compose" / "grafana"


def test_the_dashboard_is_published_behind_its_token() -> None:
    compose = _compose()
    telemetry, files = compose["services"]["telemetry"], compose["secrets"]
    env = telemetry["environment"]
    port = env["METATUNE_TELEMETRY_HTTP_PORT"]
    assert f"{port}:{port}" in telemetry["ports"]
    # off loopback: the app refuses to serve without the tokens, which it finds in its secrets
    assert not is_loopback(env["METATUNE_TELEMETRY_HTTP_HOST"])
    assert env["METATUNE_DASHBOARD_TOKENS_DIR"] == "/run/secrets"
    for name in (TOKEN_FILE, PREVIOUS_FILE):  # mounted as /run/secrets/<name>
        assert name in telemetry["secrets"]
        assert files[name]["file"] == f"./secrets/nats/{name}"  # where `metatune secrets` writes
    assert {s for s in telemetry["secrets"] if s.startswith("dashboard")} == {
        TOKEN_FILE,
        PREVIOUS_FILE,
    }


def _metric_names() -> set[str]:
    """Every family /metrics can expose (a snapshot with a plan and a live agent)."""
    plan = dict.fromkeys(
        ("plan_version", "solve_seconds", "expected_emissions_g", "baseline_emissions_g"), 1
    )
    snapshot = Snapshot(
        ingestion={"lag_s": 1.0, "stored": 1},
        outbox={"pending": 0, "sending": 0, "dead": 0, "retrying": 0, "oldest_s": 0},
        plan=plan | {"infeasible": 0, "at": 0, "jobs": 1},
        agents={"fra1": (8, 2)},
        datacenters=["fra1"],
    )
    return {family.name for family in families(snapshot)}


def test_prometheus_scrapes_metrics_with_the_token_and_grafana_reads_it() -> None:
    compose = _compose()
    prometheus, telemetry = compose["services"]["prometheus"], compose["services"]["telemetry"]
    assert prometheus["secrets"] == [TOKEN_FILE]  # the token and nothing else
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert "ports" not in prometheus  # reached by Grafana inside the compose network only
    (job,) = yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"] == {
        "type": "Bearer",
        "credentials_file": f"/run/secrets/{TOKEN_FILE}",
    }
    port = telemetry["environment"]["METATUNE_TELEMETRY_HTTP_PORT"]
    assert job["static_configs"] == [{"targets": [f"telemetry:{port}"]}]
    assert compose["services"]["grafana"]["depends_on"]["prometheus"]["condition"] == (
        "service_healthy"
    )
    sources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "metatune.yaml").read_text()
    )
    (source,) = [d for d in sources["datasources"] if d["type"] == "prometheus"]
    assert source["url"] == "http://prometheus:9090"
    # every panel of the metrics dashboard asks Prometheus for metrics /metrics exposes
    board = json.loads((GRAFANA / "dashboards" / "metatune-metrics.json").read_text())
    exposed, asked = _metric_names(), set()
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == source["uid"], panel["title"]
        for target in panel["targets"]:
            asked |= set(re.findall(r"\bmetatune_\w+", target["expr"]))
    assert asked and asked <= exposed, asked - exposed
    assert {"metatune_jobs", "metatune_gpus_busy", "metatune_plan_solve_seconds"} <= asked


SECRETS_GID = r"\$\{METATUNE_SECRETS_GID:\?[^}]+\}"


def test_every_container_that_mounts_a_secret_runs_in_the_secrets_group() -> None:
    """Compose mounts a file secret with its host owner, group and mode (it cannot change them for a
    file) and `metatune secrets --group GID` makes the files 0640 and the group's: each container
    that mounts one runs in that group, and no other. The `:?` form makes compose refuse to start
    without METATUNE_SECRETS_GID rather than run containers that cannot read their secrets."""
    compose = _compose()
    services = compose["services"]
    with_secrets = {name for name, service in services.items() if service.get("secrets")}
    assert {name for name, service in services.items() if "group_add" in service} == with_secrets
    assert {"profiler", "bus-init", "prometheus", "grafana", "trainer-agent-fra1"} <= with_secrets
    for name in with_secrets:
        (group,) = services[name]["group_add"]
        assert re.fullmatch(SECRETS_GID, group), name
    text = COMPOSE.read_text()
    assert "metatune secrets --group" in text  # the header says how the files are made
    interpolated = yaml.safe_load(re.sub(SECRETS_GID, "1000", text))  # as compose would
    assert _errors(interpolated) == []
    assert {tuple(s["group_add"]) for s in interpolated["services"].values()} == {("1000",)}
