"""EIA-930 through a loopback stand-in of the EIA API v2 (eia_api.py): 4 real days of ERCOT's
hourly generation by energy source (fixtures/providers/eia930_ERCO.json, across the US clock
change) become the life-cycle intensity CarbonCast published for those hours."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from metatune.errors import ConfigurationError
from metatune.registry import load_registry
from metatune_forecaster.adapters.eia930 import Eia930Source, hourly_intensity
from metatune_forecaster.adapters.intensity_sources import intensity_source
from metatune_forecaster.adapters.live import region_sources
from metatune_forecaster.domain.generation_mix import IPCC_AR5_LIFECYCLE, average_intensity
from metatune_forecaster.domain.providers import (
    EmissionFactors,
    ProviderUnavailable,
    Signal,
    SourceMisconfigured,
)
from metatune_forecaster.settings import ForecasterSettings

from .eia_api import EiaApi, serve
from .provider_api import fixture
from .registries import registry_file

DATA = fixture("eia930_ERCO")
ROWS: list[dict[str, Any]] = DATA["records"]
KEY = "eia-key-0a9b8c7d6e5f"
START, END = datetime(2022, 3, 11, tzinfo=UTC), datetime(2022, 3, 15, tzinfo=UTC)


@pytest.fixture
def api() -> Iterator[EiaApi]:
    yield from serve(ROWS, KEY)


def settings(tmp_path: Path, api: EiaApi, key: str = KEY, **extra: Any) -> ForecasterSettings:
    (tmp_path / "eia.key").write_text(key + "\n")
    values: dict[str, Any] = {
        "eia_url": api.url,
        "eia_api_key_file": tmp_path / "eia.key",
        "intensity_retry_budget_s": 5.0,
        "intensity_retry_initial_s": 0.01,
        **extra,
    }
    return ForecasterSettings(**values)


def published() -> pd.Series:
    """CarbonCast's life-cycle intensity of the fixture's hours, by hour start."""
    values = DATA["lifecycle"]
    return pd.Series(list(values.values()), index=pd.DatetimeIndex(list(values), tz="UTC"))


@pytest.mark.asyncio
async def test_four_days_of_generation_become_carboncasts_published_lifecycle_intensity(
    tmp_path: Path, api: EiaApi
) -> None:
    source = intensity_source("eia-930", settings(tmp_path, api))
    assert (source.name, source.signal, source.factors) == (
        "eia-930",
        Signal.average,
        EmissionFactors.lifecycle,
    )
    observed = await source.observed("ERCO", START, END)
    # 96 hours across the US clock change of 13 March: contiguous in UTC, one value each
    assert len(observed) == 96 and str(observed.index.tz) == "UTC"
    assert (observed.index.to_series().diff().dropna() == pd.Timedelta(hours=1)).all()
    assert observed.index[0] == pd.Timestamp(START)  # period 01 is the hour from 00:00
    np.testing.assert_allclose(observed.to_numpy(), published().to_numpy(), rtol=0, atol=0.006)
    assert [(q["start"], q["end"]) for q in api.requests] == [
        (["2022-03-11T01"], ["2022-03-15T00"])  # hour-ending periods, both included
    ]
    assert api.requests[0]["facets[respondent][]"] == ["ERCO"]


@pytest.mark.asyncio
async def test_long_windows_and_large_answers_are_paged(tmp_path: Path, api: EiaApi) -> None:
    keyed = intensity_source("eia-930", settings(tmp_path, api))
    assert isinstance(keyed, Eia930Source)
    source = Eia930Source(keyed.http, page_hours=48, rows_per_request=100)
    observed = await source.observed("ERCO", START, END)
    np.testing.assert_allclose(observed.to_numpy(), published().to_numpy(), rtol=0, atol=0.006)
    pages = [(q["start"][0], q["offset"][0]) for q in api.requests]
    # two windows of 48 h (336 rows each: 7 sources an hour), each in pages of 100 rows
    assert pages == [
        *[("2022-03-11T01", str(o)) for o in (0, 100, 200, 300)],
        *[("2022-03-13T01", str(o)) for o in (0, 100, 200, 300)],
    ]


@pytest.mark.asyncio
async def test_a_refused_key_names_its_setting_and_the_key_appears_nowhere(
    tmp_path: Path, api: EiaApi, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # httpx's own level too: telemetry's webhook delivery, imported by other tests in the same
    # process, quiets it to WARNING
    caplog.set_level(logging.DEBUG, logger="httpx")
    good = intensity_source("eia-930", settings(tmp_path, api))
    api.failures = [503, 502]  # retried, then answered
    assert len(await good.observed("ERCO", START, START.replace(day=12))) == 24
    bad = intensity_source("eia-930", settings(tmp_path, api, key="not-the-key"))
    with pytest.raises(SourceMisconfigured) as refused:
        await bad.observed("ERCO", START, END)
    message = str(refused.value)
    assert "HTTP 403" in message and "METATUNE_EIA_API_KEY_FILE" in message
    assert "\n" not in message
    assert isinstance(good, Eia930Source)
    with pytest.raises(ProviderUnavailable, match="HTTP 400") as echoed:  # its body echoes the key
        await good.http.get_json("/v2/electricity/rto/fuel-type-data/data/", {"frequency": "x"})
    assert api.requests[0]["api_key"] == [KEY]  # the key did reach the provider
    assert "HTTP Request: GET" in caplog.text and "fuel-type-data" in caplog.text  # httpx's log
    shown = " ".join([caplog.text, message, str(echoed.value), repr(good), repr(bad)])
    assert "***" in str(echoed.value)  # what the provider echoed, scrubbed
    assert KEY not in shown and "not-the-key" not in shown


def test_a_missing_key_names_its_setting(tmp_path: Path) -> None:
    with pytest.raises(SourceMisconfigured, match="METATUNE_EIA_API_KEY_FILE"):
        intensity_source("eia-930", ForecasterSettings(eia_api_key_file=None))


def test_a_direct_deployment_refuses_it_at_start_a_lifecycle_one_takes_it(
    tmp_path: Path, api: EiaApi
) -> None:
    registry = load_registry(
        registry_file(
            tmp_path,
            ("dfw1", "US-TEX-ERCO", 'intensity_source = "eia-930"\nintensity_zone = "ERCO"\n'),
        )
    )
    with pytest.raises(ConfigurationError) as caught:
        region_sources(registry, settings(tmp_path, api))
    assert str(caught.value) == (
        "datacenter dfw1: eia-930 gives life-cycle intensities and METATUNE_EMISSION_FACTORS is "
        "direct: a deployment uses one kind of emission factors; set "
        "METATUNE_EMISSION_FACTORS=lifecycle (every region's source must then give them) or "
        "choose another source"
    )
    live = region_sources(registry, settings(tmp_path, api, emission_factors="lifecycle"))
    assert live["US-TEX-ERCO"].zone == "ERCO"
    assert live["US-TEX-ERCO"].factors is EmissionFactors.lifecycle


def test_the_factor_table_leaves_storage_out_and_counts_negatives_as_zero(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hour = "2024-08-01T13"
    rows = [
        {"period": hour, "fueltype": "NG", "value": "600"},
        {"period": hour, "fueltype": "SUN", "value": 300},
        {"period": hour, "fueltype": "SNB", "value": "100"},  # solar with storage: solar
        {"period": hour, "fueltype": "BAT", "value": "-250"},  # charging: left out
        {"period": hour, "fueltype": "PS", "value": "400"},  # discharging: left out too
        {"period": hour, "fueltype": "NUC", "value": "-5"},  # own use: zero
        {"period": hour, "fueltype": "WND", "value": None},  # not reported
        {"period": hour, "fueltype": "XYZ", "value": "0"},  # a code EIA adds later
    ]
    [(start, value)] = hourly_intensity(rows)
    assert start == pd.Timestamp("2024-08-01T12:00Z")
    assert value == pytest.approx((600 * 490 + 400 * 45) / 1000)
    assert "XYZ" in caplog.text
    assert average_intensity({"storage": 10.0, "nuclear": 0.0}, IPCC_AR5_LIFECYCLE) is None
    assert IPCC_AR5_LIFECYCLE["coal"] == 820 and IPCC_AR5_LIFECYCLE["wind"] == 11
