"""``metatune forecaster forecast --region R``: one round now for one region, from the observation
store and the weather source, the service's round itself (real PostgreSQL, the shipped model)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from metatune.contracts import CarbonForecast
from metatune.contracts.forecasts import HORIZON_HOURS
from metatune.registry import default_registry
from metatune.settings import Settings
from metatune_cli.cli.main import app
from metatune_forecaster.adapters.live import LiveIntensity, LiveSource
from metatune_forecaster.adapters.model_files import load_weather_error
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.adapters.replay import ReplayData, ReplayWeather
from metatune_forecaster.adapters.runtime import RegionForecaster, region_sites
from metatune_forecaster.adapters.store import ObservationStore
from metatune_forecaster.domain.features import HISTORY_HOURS
from metatune_forecaster.domain.model import CarbonModel
from metatune_forecaster.domain.providers import Signal

from .trace_source import TraceSource, cli_db, trace

__all__ = ["cli_db"]

ISSUE = datetime(2023, 6, 5, 0, tzinfo=UTC)
WINDOW = pd.date_range(ISSUE - timedelta(hours=HISTORY_HOURS), ISSUE, freq="h", inclusive="left")


def seed(schema: str, zone: str, values: pd.Series) -> None:
    """The CLI's store (its schema) holding ``values`` as ``zone``'s 8 weeks before ISSUE."""

    async def main() -> None:
        async with ObservationStore(Settings().database_url, schema=schema) as store:
            await store.migrate()
            await store.upsert(zone, Signal.average, "test-provider", values.reindex(WINDOW))

    asyncio.run(main())


def service_round(schema: str, model: CarbonModel, replay: ReplayData, region: str, registry):
    """What the service's round (:class:`RegionForecaster`) makes of that store for ``region``."""
    weather = ReplayWeather(replay, load_weather_error(WEATHER_ERROR_PATH))
    site = region_sites(registry)[region]

    async def main():
        async with ObservationStore(Settings().database_url, schema=schema) as store:
            intensity = LiveIntensity(store, {region: LiveSource(TraceSource(), region)})
            forecaster = RegionForecaster(model, [site], weather, intensity)
            (outcome,) = await forecaster.round(ISSUE, ISSUE)
            return outcome.forecast

    return asyncio.run(main())


def bands(forecast: CarbonForecast) -> np.ndarray:
    return np.array([forecast.p10_g_per_kwh, forecast.g_per_kwh, forecast.p90_g_per_kwh])


def test_forecast_command_is_one_round_from_the_store(
    cli_db: str, model: CarbonModel, replay: ReplayData
) -> None:
    doubled = 2 * trace("DE")  # not the replay's values: the history can only come from the store
    seed(cli_db, "DE", doubled)
    args = ["forecaster", "forecast", "--region", "DE", "--at", ISSUE.isoformat()]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    got = CarbonForecast.model_validate(json.loads(result.stdout))
    assert (got.region, got.start, got.stale, got.source, got.signal) == (
        "DE",
        ISSUE,
        False,
        "replay",  # the embedded registry's source for DE; every hour was in the store
        "average",
    )
    assert (got.history_hours, got.short_history, got.imputed_hours) == (HISTORY_HOURS, False, [])
    assert got.observed is not None
    assert [h.g_per_kwh for h in got.observed.hours] == pytest.approx(
        doubled.reindex(WINDOW[-24:]).round(2).tolist()
    )
    expected = service_round(cli_db, model, replay, "DE", default_registry())
    assert expected is not None
    np.testing.assert_allclose(bands(got), bands(expected), rtol=0, atol=1e-6)

    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "DE: issued 2023-06-05 00:00 UTC" in table.output
    assert "1344 history hours" in table.output and "p90" in table.output
    assert "(average, direct factors)" in table.output
    assert f"{got.g_per_kwh[24]:.1f}" in table.output  # the row of lead +24 h

    unknown = CliRunner().invoke(app, ["forecaster", "forecast", "--region", "XX"])
    assert unknown.exit_code == 2 and "not in the datacenter registry" in unknown.output


def test_a_region_without_weather_is_forecast_from_history_alone_and_says_so(
    cli_db: str, model: CarbonModel, replay: ReplayData, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's region the replay has no weather for (offline: no weather service either):
    its own history in the store is enough; every hour is listed as imputed."""
    registry = tmp_path / "datacenters.toml"
    registry.write_text(
        '[[datacenter]]\nname = "ops-west1"\nregion = "OPS-WEST"\nregion_group = "EU"\n'
        'latitude = 50.1\nlongitude = 8.7\npue = 1.2\ngpu_model = "H100-80GB"\ngpus = 4\n'
        "gpu_power_w = 700\n"
    )
    monkeypatch.setenv("METATUNE_REGISTRY_PATH", str(registry))
    assert "OPS-WEST" not in replay.regions()
    seed(cli_db, "OPS-WEST", trace("DE"))
    args = ["forecaster", "forecast", "--region", "OPS-WEST", "--at", ISSUE.isoformat()]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    got = CarbonForecast.model_validate(json.loads(result.stdout))
    assert (got.region, got.stale, got.history_hours) == ("OPS-WEST", False, HISTORY_HOURS)
    assert got.imputed_hours == list(range(HORIZON_HOURS))  # the flag: no weather for any hour
    expected = service_round(cli_db, model, replay, "OPS-WEST", Settings().registry())
    assert expected is not None and expected.imputed_hours == got.imputed_hours
    np.testing.assert_allclose(bands(got), bands(expected), rtol=0, atol=1e-6)

    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "no weather: from history alone" in table.output


def test_forecast_without_a_database_says_how_to_start_one(database_down: int) -> None:
    result = CliRunner().invoke(app, ["forecaster", "forecast", "--region", "DE"])
    assert result.exit_code == 3, result.output  # unavailable, as backfill's
    (line,) = result.stderr.strip().splitlines()
    assert (
        line.startswith("error:")
        and f"127.0.0.1:{database_down}" in line
        and "`metatune up`" in line
    )
