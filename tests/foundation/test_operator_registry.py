"""An operator's own registry (``METATUNE_REGISTRY_PATH``), with datacenter and region names the
embedded one lacks, is the one every reader sees: ``metatune secrets`` makes an agent
credential (and leaf config) for exactly its datacenters, the forecaster service publishes for
exactly its regions, and telemetry's ``/metrics`` and API list exactly its datacenters. Nothing
is handed a registry: each resolves it from its settings. Real NATS, PostgreSQL and processes."""

from __future__ import annotations

import json
from pathlib import Path

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
from metatune_telemetry.adapters.http import create_app
from metatune_telemetry.settings import TelemetrySettings
from tests.support.cli import run
from tests.support.databases import schema
from tests.support.waiting import received_on, wait_for

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
