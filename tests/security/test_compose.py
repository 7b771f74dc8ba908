"""The compose deployment runs NATS with auth on: the generated credentials fit its config and
every container gets only its own credential, never a password in the compose file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from metatune.bus.auth import principals
from metatune.bus.credentials import generate
from metatune.embedded.servers import nats_server_binary

COMPOSE = Path(__file__).resolve().parents[2] / "compose"


def test_the_compose_nats_config_with_generated_credentials_is_valid(tmp_path: Path) -> None:
    shutil.copy(COMPOSE / "nats" / "nats.conf", tmp_path / "nats.conf")
    generate(tmp_path / "secrets", principals())
    shutil.copy(tmp_path / "secrets" / "auth.conf", tmp_path / "auth.conf")  # where the compose secret is mounted
    checked = subprocess.run([str(nats_server_binary()), "-c", str(tmp_path / "nats.conf"), "-t"],
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "include ./auth.conf" in (COMPOSE / "nats" / "nats.conf").read_text()


def test_each_container_gets_only_its_own_nats_credential() -> None:
    compose = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    users = {p.name for p in principals()}
    files = {name: spec["file"] for name, spec in compose["secrets"].items()}
    assert all(path.startswith("./secrets/") for path in files.values())
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        assert not any("PASSWORD" in key and not key.endswith("_FILE") for key in env if key.startswith("METATUNE_NATS"))
        if name in {"nats", "timescaledb", "bus-init"}:
            continue
        (secret,) = service["secrets"]
        user = Path(files[secret]).name.removesuffix(".nk")
        assert user in users and user == env["METATUNE_SERVICE_NAME"], name
        assert env["METATUNE_NATS_NKEY_FILE"] == f"/run/secrets/{secret}"
    assert "@" not in " ".join(s["environment"]["METATUNE_NATS_URL"] for s in compose["services"].values()
                               if "METATUNE_NATS_URL" in s.get("environment", {}))
