"""`metatune status` judges the instances the platform runs: those `up` or the demo recorded
starting, else the settings' local datacenters that the deployment's registry has, and whatever
heartbeats. The running demo (four agents of its own registry, CLI settings that default to
fra1, osl1 and sjc1) once read `trainer-agent.sjc1 down` and exit 1. Real NATS, the real CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import nats

from metatune.bus import HEALTH_BUCKET, ensure_streams
from metatune.contracts import ServiceHealth
from metatune.settings import Settings
from metatune_cli.demo.scenario import demo_registry_path
from metatune_cli.embedded.supervisor import ManagedProcess, RunState, save_state
from tests.support.cli import run

CORE = ["profiler", "recommender", "forecaster", "scheduler", "telemetry"]


async def heartbeats(url: str, instances: list[str]) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await ensure_streams(js, Settings(nats_url=url))
    kv = await js.key_value(HEALTH_BUCKET)
    now = time.time()
    for instance in instances:
        health = ServiceHealth(
            service=instance.split(".")[0],
            instance=instance,
            pid=1,
            host="test",
            version="test",
            started_at=now,
            heartbeat_at=now,
        )
        await kv.put(instance, health.model_dump_json().encode())
    await nc.close()


def recorded(data_dir: Path, url: str, instances: list[str]) -> None:
    processes = [
        ManagedProcess(name=i, pid=1, pgid=1, command=["x"], log="x.log", role="service")
        for i in instances
    ]
    state = RunState(
        nats_url=url,
        database_url="postgresql://postgres@127.0.0.1:1/x",
        nats_embedded=True,
        postgres_embedded=True,
        simulated=True,
        processes=processes,
    )
    save_state(Settings(data_dir=data_dir), state)


def instances_of(result) -> set[str]:
    return {row["instance"] for row in json.loads(result.stdout)["services"]}


async def test_status_reports_the_demos_agents_not_the_settings_defaults(
    private_nats: str, env_for, tmp_path: Path
) -> None:
    demo = [*CORE, *(f"trainer-agent.{dc}" for dc in ("osl1", "fra1", "yyz1", "dfw1"))]
    recorded(tmp_path, private_nats, demo)
    await heartbeats(private_nats, demo)
    env = env_for(
        METATUNE_NATS_URL=private_nats,
        METATUNE_DATA_DIR=str(tmp_path),
        METATUNE_REGISTRY_PATH=str(demo_registry_path()),  # as `metatune demo --env` exports
        METATUNE_HEARTBEAT_S="30",  # fresh for the whole test
    )
    status = run(["status", "--json"], env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert instances_of(status) == set(demo)  # no trainer-agent.sjc1


async def test_without_recorded_processes_only_the_registrys_datacenters_are_expected(
    private_nats: str, env_for, tmp_path: Path
) -> None:
    recorded(tmp_path, private_nats, [])
    await heartbeats(private_nats, [*CORE, "trainer-agent.fra1"])
    env = env_for(
        METATUNE_NATS_URL=private_nats,
        METATUNE_DATA_DIR=str(tmp_path),
        METATUNE_REGISTRY_PATH=str(demo_registry_path()),  # no sjc1
        METATUNE_LOCAL_DATACENTERS='["fra1", "sjc1", "osl1"]',
        METATUNE_HEARTBEAT_S="30",
    )
    status = run(["status", "--json"], env)
    # osl1 is in the registry and expected, and silent: down, exit 1; sjc1 is not asked about
    assert status.returncode == 1, status.stdout + status.stderr
    rows = {row["instance"]: row for row in json.loads(status.stdout)["services"]}
    assert set(rows) == {*CORE, "trainer-agent.fra1", "trainer-agent.osl1"}
    assert rows["trainer-agent.osl1"]["status"] == "down" and rows["trainer-agent.fra1"]["healthy"]
