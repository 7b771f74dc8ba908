"""An operator's own registry (``METATUNE_REGISTRY_PATH``), with datacenter and region names the
embedded one lacks, is the one every reader sees: ``metatune secrets`` makes an agent
credential (and leaf config) for exactly its datacenters, the forecaster service publishes for
exactly its regions, and telemetry's ``/metrics`` and API list exactly its datacenters. Nothing
is handed a registry: each resolves it from its settings. Real NATS, PostgreSQL and processes;
the last test runs the whole platform (`metatune up`) on it, auth on."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import nats
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from metatune import subjects
from metatune.bus.auth import agent_user
from metatune.contracts import CarbonForecast, ErrorEvent
from metatune.registry import default_registry
from metatune_forecaster.adapters.package_data import REPLAY_PATH
from metatune_forecaster.app import create_service
from metatune_forecaster.settings import ForecasterSettings
from metatune_telemetry.adapters.db import Database
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.settings import TelemetrySettings
from tests.support.cli import run
from tests.support.databases import schema
from tests.support.servers import free_port
from tests.support.waiting import received_on, wait_for, wait_for_sync

__all__ = ["schema"]

# the operator's sites, each on a grid region the embedded registry does not name; their replay
# extract is two embedded regions' history and weather under the operator's names
SITES = {"ops-north1": ("OPS-NORTH", "NO", 59.9, 10.7), "ops-west1": ("OPS-WEST", "DE", 50.1, 8.7)}


def operator_files(folder: Path) -> tuple[Path, Path]:
    """The operator's registry file and the replay extract its regions forecast from."""
    registry = folder / "datacenters.toml"
    registry.write_text(
        "".join(
            f'[[datacenter]]\nname = "{name}"\nregion = "{region}"\nregion_group = "EU"\n'
            f"latitude = {lat}\nlongitude = {lon}\npue = 1.2\n"
            'gpu_model = "H100-80GB"\ngpus = 4\ngpu_power_w = 700\n\n'
            for name, (region, _, lat, lon) in SITES.items()
        )
    )
    extract = pd.read_parquet(REPLAY_PATH)
    renamed = {source: region for region, source, _, _ in SITES.values()}
    ours = extract[extract["region"].astype(str).isin(renamed)].copy()
    ours["region"] = ours["region"].astype(str).map(renamed)
    replay = folder / "replay.parquet"
    ours.to_parquet(replay)
    return registry, replay


def test_the_names_are_the_operators_own() -> None:
    embedded = default_registry()
    assert not set(SITES) & set(embedded.names())
    assert not {region for region, *_ in SITES.values()} & set(embedded.regions())


def test_secrets_make_credentials_for_exactly_the_registry_datacenters(
    env_for, tmp_path: Path
) -> None:
    registry, _ = operator_files(tmp_path)
    env = env_for(
        METATUNE_NATS_SECRETS_DIR=str(tmp_path / "nats"), METATUNE_REGISTRY_PATH=str(registry)
    )
    made = run(["secrets", "--json"], env)
    assert made.returncode == 0, made.stderr
    files = set(json.loads(made.stdout)["files"])
    agents = {agent_user(name) for name in SITES}
    assert {
        f.removesuffix(".nk") for f in files if f.startswith("trainer-agent.") and f.endswith(".nk")
    } == agents
    assert {f.removesuffix(".leaf.conf") for f in files if f.endswith(".leaf.conf")} == agents


@pytest.mark.asyncio
async def test_the_forecaster_publishes_for_exactly_the_registry_regions(
    module_nats: str, tmp_path: Path
) -> None:
    registry, replay = operator_files(tmp_path)
    settings = ForecasterSettings(
        nats_url=module_nats,
        registry_path=registry,
        forecaster_replay_path=replay,
        heartbeat_s=0.5,
    )
    nc = await nats.connect(settings.nats_url)
    forecasts = await received_on(nc, subjects.FORECASTS_ALL, CarbonForecast)
    errors = await received_on(nc, subjects.errors("forecaster"), ErrorEvent)
    ours = {region for region, *_ in SITES.values()}
    try:
        async with create_service(settings).running():  # its first round, at start-up
            await wait_for(
                lambda: errors or {f.region for f in forecasts} >= ours, "a round's forecasts"
            )
    finally:
        await nc.close()
    assert errors == []
    assert {f.region for f in forecasts} == ours


@pytest.mark.asyncio
async def test_telemetry_lists_exactly_the_registry_datacenters(
    schema: str, tmp_path: Path
) -> None:
    registry, _ = operator_files(tmp_path)
    settings = TelemetrySettings(registry_path=registry, telemetry_http_port=0)
    db = Database(settings.database_url, schema=schema)
    await db.migrate()
    try:
        with TestClient(create_app(db, settings)) as client:
            metrics = client.get("/metrics")
            forecast = client.get("/api/datacenters/ops-north1/forecast")
    finally:
        await db.close()
    assert metrics.status_code == 200, metrics.text
    listed = {
        s.labels["datacenter"]
        for family in text_string_to_metric_families(metrics.text)
        if family.name == "metatune_agent_up"
        for s in family.samples
    }
    assert listed == set(SITES)
    assert forecast.status_code == 200 and forecast.json()["region"] == "OPS-NORTH"


def scrape_agents_up(port: int) -> dict[str, float]:
    """``metatune_agent_up`` per datacenter on telemetry's ``/metrics`` (empty until it answers)."""
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5.0)
    except httpx.HTTPError:
        return {}
    return {
        s.labels["datacenter"]: s.value
        for family in text_string_to_metric_families(answer.text)
        if family.name == "metatune_agent_up"
        for s in family.samples
    }


@pytest.mark.integration  # starts the embedded nats-server and PostgreSQL itself
@pytest.mark.slow  # starts the whole platform (`metatune up`)
def test_up_on_the_operators_registry_serves_exactly_its_datacenters(
    env_for, tmp_path: Path
) -> None:
    registry, replay = operator_files(tmp_path)
    http_port = free_port()
    env = env_for(
        METATUNE_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        METATUNE_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/metatune",
        METATUNE_DATA_DIR=str(tmp_path / "platform"),
        METATUNE_REGISTRY_PATH=str(registry),
        METATUNE_FORECASTER_REPLAY_PATH=str(replay),
        METATUNE_LOCAL_DATACENTERS='["ops-north1"]',
        METATUNE_TELEMETRY_HTTP_PORT=str(http_port),
        METATUNE_UP_TIMEOUT_S="240",
    )
    ours = {region for region, *_ in SITES.values()}
    try:
        up = run(["up", "--json"], env)
        assert up.returncode == 0, up.stdout + up.stderr
        services = json.loads(up.stdout)["status"]["services"]
        alive = {row["instance"] for row in services if row["heartbeat_age_s"] is not None}
        assert {"forecaster", "telemetry", "trainer-agent.ops-north1"} <= alive  # it logged in

        def forecast_regions() -> set[str]:
            shown = run(["events", "--json", "--subject", "metatune.forecasts.>"], env)
            return {json.loads(line)["region"] for line in shown.stdout.splitlines()}

        regions = wait_for_sync(
            lambda: (found := forecast_regions()) >= ours and found,
            "forecasts of both regions",
            timeout=120,
        )
        assert regions == ours
        # telemetry lists the registry's datacenters, and hears the local one's agent
        agents = wait_for_sync(
            lambda: (found := scrape_agents_up(http_port)).get("ops-north1") == 1 and found,
            "telemetry hearing the ops-north1 agent",
            timeout=120,
        )
        assert set(agents) == set(SITES)
    finally:
        down = run(["down", "--json"], env)
    assert down.returncode == 0, down.stderr
