"""The compose deployment runs NATS with auth on: the generated credentials fit its config and
every container gets only its own credential, never a password in the compose file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from metatune.bus.auth import agent_user, principals
from metatune.bus.credentials import generate
from metatune.bus.leafnodes import leaf_config
from metatune.registry import default_registry
from metatune_cli.embedded.servers import nats_server_binary

COMPOSE = Path(__file__).resolve().parents[2] / "compose"
LEAF_CREDENTIALS = (
    "leaf-credentials.conf"  # where each leaf container gets its datacenter's <agent>.leaf.conf
)


def _valid(config: Path) -> None:
    checked = subprocess.run(
        [str(nats_server_binary()), "-c", str(config), "-t"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "NATS_SERVER_NAME": "nats-1"},
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_compose_nats_config_with_generated_credentials_is_valid(tmp_path: Path) -> None:
    shutil.copy(COMPOSE / "nats" / "nats.conf", tmp_path / "nats.conf")
    generate(tmp_path / "secrets", principals(default_registry()))
    shutil.copy(
        tmp_path / "secrets" / "auth.conf", tmp_path / "auth.conf"
    )  # where the compose secret is mounted
    _valid(tmp_path / "nats.conf")
    assert "include ./auth.conf" in (COMPOSE / "nats" / "nats.conf").read_text()


def test_the_compose_leaf_config_is_the_generated_one_and_valid(tmp_path: Path) -> None:
    hubs = [f"nats-leaf://{name}:7422" for name in ("nats", "nats-2", "nats-3")]
    expected = leaf_config(LEAF_CREDENTIALS, hubs, host="0.0.0.0", port=4222, monitor_port=8222)
    assert (COMPOSE / "nats" / "leaf.conf").read_text() == expected
    store = generate(tmp_path / "secrets", principals(default_registry()))
    shutil.copy(COMPOSE / "nats" / "leaf.conf", tmp_path / "leaf.conf")
    shutil.copy(store.leaf_file(agent_user("fra1")), tmp_path / LEAF_CREDENTIALS)
    _valid(tmp_path / "leaf.conf")


def test_each_container_gets_only_its_own_nats_credential() -> None:
    compose = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    users = {p.name for p in principals(default_registry())}
    files = {name: spec["file"] for name, spec in compose["secrets"].items()}
    assert all(path.startswith("./secrets/") for path in files.values())
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        assert not any(
            "PASSWORD" in key and not key.endswith("_FILE")
            for key in env
            if key.startswith("METATUNE_NATS")
        )
        if name.startswith("nats") or name in {"timescaledb", "bus-init", "grafana", "prometheus"}:
            continue
        (secret,) = [s for s in service["secrets"] if s.startswith("nats_")]
        user = Path(files[secret]).name.removesuffix(".nk")
        assert user in users and user == env["METATUNE_SERVICE_NAME"], name
        assert env["METATUNE_NATS_NKEY_FILE"] == f"/run/secrets/{secret}"
    assert "@" not in " ".join(
        s["environment"]["METATUNE_NATS_URL"]
        for s in compose["services"].values()
        if "METATUNE_NATS_URL" in s.get("environment", {})
    )


def test_each_datacenter_s_agent_reaches_the_hub_through_its_own_leaf_node() -> None:
    compose = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    services, files = (
        compose["services"],
        {name: spec["file"] for name, spec in compose["secrets"].items()},
    )
    hub = [
        name for name, s in services.items() if s.get("command") == ["-c", "/etc/nats/nats.conf"]
    ]
    assert len(hub) == 3
    agents = {
        s["environment"]["METATUNE_DATACENTER"]: s
        for s in services.values()
        if "METATUNE_DATACENTER" in s.get("environment", {})
    }
    for dc, agent in agents.items():
        leaf = services[f"nats-leaf-{dc}"]
        assert agent["environment"]["METATUNE_NATS_URL"] == f"nats://nats-leaf-{dc}:4222"
        assert f"nats-leaf-{dc}" in agent["depends_on"]
        (secret,) = leaf["secrets"]  # its datacenter's leaf credential, nothing else
        assert files[secret["source"]] == f"./secrets/nats/{agent_user(dc)}.leaf.conf"
        assert secret["target"] == f"/etc/nats/{LEAF_CREDENTIALS}"


def test_no_password_is_written_in_the_compose_files() -> None:
    """Database and NATS passwords reach containers only as compose secrets (files under ./secrets/)."""
    compose = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        assert all(key.endswith("_FILE") for key in env if "PASSWORD" in key), name
        urls = [value for key, value in env.items() if key.endswith("_URL")]
        assert not any(re.search(r"//[^/@:]+:[^/@]+@", url) for url in urls), (
            name,
            "a URL with a password",
        )
        if "METATUNE_DATABASE_URL" in env:
            assert env["METATUNE_DATABASE_PASSWORD_FILE"] == "/run/secrets/db_password"
            assert "db_password" in service["secrets"], name
    assert compose["secrets"]["db_password"]["file"] == "./secrets/db.password"
    datasource = (
        COMPOSE / "grafana" / "provisioning" / "datasources" / "metatune.yaml"
    ).read_text()
    assert re.search(r"password:\s*\$METATUNE_DB_PASSWORD\b", datasource)
