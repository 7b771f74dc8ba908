"""Signals and emission factors kept apart: a registry that mixes average and marginal sources, or
a source of other factors than the deployment's, is refused at start in one line; the store keeps
each factor type's hours to itself; every forecast records its factors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from metatune.errors import ConfigurationError
from metatune.registry import load_registry
from metatune.settings import Settings
from metatune_forecaster.adapters.live import LiveSource, region_kinds, region_sources
from metatune_forecaster.adapters.model_files import load_weather_error
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.adapters.replay import ReplayData, ReplayIntensity, ReplayWeather
from metatune_forecaster.adapters.runtime import RegionForecaster, sites_of
from metatune_forecaster.adapters.store import ObservationStore, Upserted
from metatune_forecaster.app import create_service
from metatune_forecaster.domain.model import CarbonModel
from metatune_forecaster.domain.providers import EmissionFactors, Signal, SourceMisconfigured
from metatune_forecaster.domain.signals import (
    RegionKind,
    check_answered_factors,
    deployment_signal,
)
from metatune_forecaster.settings import ForecasterSettings
from tests.support.builders import small_registry

from .registries import registry_file
from .trace_source import TraceSource, store, trace

__all__ = ["store"]

DIRECT, LIFECYCLE = EmissionFactors.direct, EmissionFactors.lifecycle
ISSUE = datetime(2023, 6, 5, 0, tzinfo=UTC)


def kind(region: str, source: str, signal: Signal, factors: EmissionFactors = DIRECT):
    return RegionKind(region, source, signal, factors)


def test_one_signal_passes_and_a_mix_is_refused_naming_each_side() -> None:
    same = [kind("DE", "replay", Signal.average), kind("GB", "uk-carbon-intensity", Signal.average)]
    assert deployment_signal(same, DIRECT) is Signal.average
    assert deployment_signal([kind("X", "watttime", Signal.marginal)], DIRECT) is Signal.marginal
    with pytest.raises(ConfigurationError) as caught:
        deployment_signal([*same, kind("US-CAL-CISO", "watttime", Signal.marginal)], DIRECT)
    message = str(caught.value)
    assert "mixes average and marginal" in message and "\n" not in message
    assert "average: DE (replay), GB (uk-carbon-intensity)" in message
    assert "marginal: US-CAL-CISO (watttime)" in message


def test_a_source_of_other_factors_than_the_deployments_is_refused() -> None:
    with pytest.raises(ConfigurationError) as caught:
        deployment_signal([kind("DE", "replay", Signal.average, DIRECT)], LIFECYCLE)
    message = str(caught.value)
    assert message.startswith("region DE: replay gives direct intensities")
    assert "METATUNE_EMISSION_FACTORS is lifecycle" in message and "\n" not in message


@pytest.mark.parametrize("answered", ["lifecycle", "LIFECYCLE", "life-cycle"])
def test_a_response_stating_other_factors_is_refused(answered: str) -> None:
    check_answered_factors("P", "direct", DIRECT)
    check_answered_factors("P", None, DIRECT)  # a provider that does not say
    check_answered_factors("P", answered, LIFECYCLE)
    with pytest.raises(SourceMisconfigured, match=r"refused, nothing stored"):
        check_answered_factors("P", answered, DIRECT)


def test_the_service_refuses_a_registry_that_mixes_signals_at_start(tmp_path: Path) -> None:
    """fra1 (DE) on a marginal source, osl1 (NO) on the replay (average): no service is built."""
    registry = small_registry("fra1", "osl1")
    marginal = {"DE": LiveSource(TraceSource(Signal.marginal), "DE")}
    with pytest.raises(ConfigurationError, match=r"mixes average and marginal .*NO \(replay\)"):
        create_service(Settings(), registry, sources=marginal)
    average = {"DE": LiveSource(TraceSource(Signal.average), "DE")}
    kinds = region_kinds(registry.regions(), average)
    assert {(k.region, k.source) for k in kinds} == {("DE", "test-provider"), ("NO", "replay")}
    assert deployment_signal(kinds, DIRECT) is Signal.average


def test_the_registry_and_the_setting_decide_the_factors_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "em.token"
    token.write_text("em-token")
    registry = load_registry(
        registry_file(
            tmp_path,
            ("lon1", "GB", 'intensity_source = "uk-carbon-intensity"\nintensity_zone = "13"\n'),
            ("fra1", "DE", 'intensity_source = "electricity-maps"\n'),
        )
    )
    direct = ForecasterSettings(electricitymaps_token_file=token)
    sources = region_sources(registry, direct)
    assert {r: s.factors for r, s in sources.items()} == {"GB": DIRECT, "DE": DIRECT}
    lifecycle = ForecasterSettings(electricitymaps_token_file=token, emission_factors="lifecycle")
    with pytest.raises(ConfigurationError) as caught:
        region_sources(registry, lifecycle)
    assert str(caught.value).startswith(
        "datacenter lon1: uk-carbon-intensity gives direct intensities and "
        "METATUNE_EMISSION_FACTORS is lifecycle"
    )
    only_em = region_sources(registry, lifecycle, only="DE")
    assert only_em["DE"].factors is LIFECYCLE  # Electricity Maps asks for the setting's factors
    monkeypatch.setenv("METATUNE_EMISSION_FACTORS", "lifecycle")
    with pytest.raises(ConfigurationError, match=r"region .*: replay gives direct intensities"):
        create_service(Settings(), small_registry("fra1"), sources={})


@pytest.mark.asyncio
async def test_the_store_keeps_each_factor_types_hours_to_itself(store: ObservationStore) -> None:
    start = pd.Timestamp("2023-03-20", tz="UTC")
    end = start + pd.Timedelta(days=1)
    day = trace("DE")[start : end - pd.Timedelta(hours=1)]
    assert await store.upsert("DE", Signal.average, "em", day, factors=LIFECYCLE) == Upserted(24, 0)
    assert (await store.observed("DE", Signal.average, start, end)).empty  # direct: none
    back = await store.observed("DE", Signal.average, start, end, factors=LIFECYCLE)
    pd.testing.assert_series_equal(back, day, check_names=False, check_freq=False)
    # the same hours fetched again as direct replace them (the deployment changed its setting)
    assert await store.upsert("DE", Signal.average, "em", day * 0.75) == Upserted(0, 24)
    assert (await store.observed("DE", Signal.average, start, end, factors=LIFECYCLE)).empty
    assert await store.sources("DE", Signal.average, start, end) == {"em": 24}


@pytest.mark.asyncio
async def test_every_forecast_records_the_deployments_factors(
    model: CarbonModel, replay: ReplayData
) -> None:
    weather = ReplayWeather(replay, load_weather_error(WEATHER_ERROR_PATH))
    intensity = ReplayIntensity(replay)
    sites = sites_of(small_registry("fra1"), intensity)
    for factors in (DIRECT, LIFECYCLE):
        forecaster = RegionForecaster(model, sites, weather, intensity, factors=factors)
        outcome = await forecaster.forecast(sites[0], ISSUE, ISSUE + timedelta(minutes=1))
        assert outcome.forecast is not None
        assert outcome.forecast.emission_factors == factors.value


def test_each_source_declares_its_factors(tmp_path: Path) -> None:
    """Fixed by the provider (GB API, WattTime: direct), asked for (Electricity Maps: the
    deployment's), or said by the operator (the Carbon Aware SDK's data source)."""
    from metatune_forecaster.adapters.intensity_sources import intensity_source

    token = tmp_path / "key"
    token.write_text("k")
    base = {"electricitymaps_token_file": token, "watttime_username": "u"}
    base |= {"watttime_password_file": token, "eia_api_key_file": token}
    direct = ForecasterSettings(**base)
    lifecycle = ForecasterSettings(
        **base, emission_factors="lifecycle", carbon_aware_sdk_factors="lifecycle"
    )
    expected = {
        "electricity-maps": (DIRECT, LIFECYCLE),
        "watttime": (DIRECT, DIRECT),
        "uk-carbon-intensity": (DIRECT, DIRECT),
        "carbon-aware-sdk": (DIRECT, LIFECYCLE),
        "eia-930": (LIFECYCLE, LIFECYCLE),
    }
    for name, factors in expected.items():
        got = (intensity_source(name, direct).factors, intensity_source(name, lifecycle).factors)
        assert got == factors, name
