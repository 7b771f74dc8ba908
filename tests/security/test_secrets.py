"""`metatune up` keeps secrets out of what it writes. The run state is owner-only (0600) and names
the file that holds the database password, never the password; every service still reaches the
database through it. A study submitted with a webhook URL that carries credentials (user info, a
query token) publishes them sealed for telemetry only. No log line, no command output and no file
under the data dir (the JetStream store, so every event, included) carries any of them; the
exceptions are the files made to hold them: the password file, the secrets folder and
telemetry's own database, the one place that stores the whole webhook URL. Real processes,
embedded servers."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.servers import free_port

PASSWORD = "pw-Zq81-never-logged"  # embedded PostgreSQL trusts local logins: any password works
HOOK_PASSWORD, HOOK_TOKEN = "hookpw-X3v9", "hooktok-Q7m2"


def env_for(**settings: str) -> dict[str, str]:
    """This machine's environment without its METATUNE_ settings, with ``settings``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")} | settings


@pytest.mark.slow  # starts the whole platform (`metatune up`)
def test_up_writes_the_database_password_nowhere_but_its_own_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "platform"
    env = env_for(
        METATUNE_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        METATUNE_DATABASE_URL=f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/metatune",
        METATUNE_DATA_DIR=str(data_dir),
        METATUNE_LOCAL_DATACENTERS='["fra1"]',
        METATUNE_UP_TIMEOUT_S="180",
    )
    outputs: list[str] = []
    try:
        up = run(["up", "--json"], env)
        outputs.append(up.stdout + up.stderr)
        assert up.returncode == 0, up.stdout + up.stderr
        state_file = data_dir / "run" / "state.json"
        assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
        state = json.loads(state_file.read_text())
        password_file = Path(state["database_password_file"])
        assert password_file.read_text() == PASSWORD
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert PASSWORD not in state["database_url"]
        dataset = tmp_path / "tiny.jsonl"
        dataset.write_text(
            "".join(f'{{"text": "row {i}", "label": "{i % 2}"}}\n' for i in range(20))
        )
        hook = f"https://ci:{HOOK_PASSWORD}@hooks.example.org/metatune?token={HOOK_TOKEN}"
        submitted = run(["submit", str(dataset), "--webhook", hook, "--json"], env)
        outputs.append(submitted.stdout + submitted.stderr)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        logged = run(["events", "--json", "--subject", "metatune.datasets.submitted"], env)
        outputs.append(logged.stdout + logged.stderr)
        assert (
            "https://hooks.example.org/metatune" in logged.stdout
            and "webhook_sealed" in logged.stdout
        )
        # every reader of the state still works: status, a restart, the services' database use
        for args in (
            ["status", "--json"],
            ["restart", "telemetry", "--json"],
            ["events", "--json"],
        ):
            result = run(args, env)
            outputs.append(result.stdout + result.stderr)
            assert result.returncode == 0, result.stdout + result.stderr
        report = json.loads(run(["status", "--json"], env).stdout)
        assert report["postgres"]["reachable"]
        assert {r["instance"] for r in report["services"] if r["healthy"]} >= {
            "telemetry",
            "scheduler",
        }
    finally:
        down = run(["down", "--json"], env)
        outputs.append(down.stdout + down.stderr)
    assert down.returncode == 0, down.stderr
    assert not (data_dir / "run" / "database.password").exists()  # `down` removes it
    secrets = (PASSWORD, HOOK_PASSWORD, HOOK_TOKEN)
    for text in outputs:
        assert not [s for s in secrets if s in text]
    kept_in = (data_dir / "secrets", data_dir / "postgres")
    leaked = [
        (str(path), s)
        for path in data_dir.rglob("*")
        if path.is_file() and not any(folder in path.parents for folder in kept_in)
        for s in secrets
        if s.encode() in path.read_bytes()
    ]
    assert leaked == []
