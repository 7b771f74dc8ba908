"""Which source feeds a region (the registry), how a source is built from settings (credentials
from files), and that no credential reaches a log line, an exception message or a repr."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from metatune.errors import ConfigurationError
from metatune.registry import INTENSITY_SOURCES, default_registry, load_registry
from metatune_forecaster.adapters.intensity_sources import LIVE_SOURCES, intensity_source
from metatune_forecaster.adapters.provider_http import retry_after_s
from metatune_forecaster.domain.providers import ProviderUnavailable, Signal, SourceMisconfigured
from metatune_forecaster.settings import ForecasterSettings

from .provider_api import FakeClock
from .registries import registry_file

TOKEN, PASSWORD = "em-secret-token-77aa", "wt-secret-password-31bb"


def test_the_embedded_registry_keeps_the_replay_everywhere() -> None:
    registry = default_registry()
    for dc in registry.datacenters:
        assert (dc.intensity_source, dc.zone) == ("replay", dc.region)
        assert registry.intensity_feed(dc.region) == ("replay", dc.region)


def test_a_region_names_its_source_and_its_zone_at_that_source(tmp_path: Path) -> None:
    registry = load_registry(
        registry_file(
            tmp_path,
            (
                "sjc1",
                "US-CAL-CISO",
                'intensity_source = "watttime"\nintensity_zone = "CAISO_NORTH"\n',
            ),
            (
                "sjc2",
                "US-CAL-CISO",
                'intensity_source = "watttime"\nintensity_zone = "CAISO_NORTH"\n',
            ),
            ("lon1", "GB", 'intensity_source = "uk-carbon-intensity"\nintensity_zone = "13"\n'),
            ("fra1", "DE", 'intensity_source = "electricity-maps"\n'),
        )
    )
    assert registry.intensity_feed("US-CAL-CISO") == ("watttime", "CAISO_NORTH")
    assert registry.intensity_feed("GB") == ("uk-carbon-intensity", "13")
    assert registry.intensity_feed("DE") == ("electricity-maps", "DE")  # zone defaults to region


def test_an_unknown_source_or_two_feeds_for_one_region_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigurationError, match="unknown intensity_source 'electricitymap'; known: replay"
    ):
        load_registry(
            registry_file(tmp_path, ("fra1", "DE", 'intensity_source = "electricitymap"\n'))
        )
    with pytest.raises(ConfigurationError, match="region DE name different intensity sources"):
        load_registry(
            registry_file(
                tmp_path,
                ("fra1", "DE", 'intensity_source = "electricity-maps"\n'),
                ("fra2", "DE", ""),
            )
        )


def settings(tmp_path: Path, **overrides: object) -> ForecasterSettings:
    (tmp_path / "em-token").write_text(TOKEN + "\n")
    (tmp_path / "wt-password").write_text(PASSWORD)
    (tmp_path / "eia-key").write_text("eia-key")
    values: dict[str, object] = {
        "eia_api_key_file": tmp_path / "eia-key",
        "electricitymaps_token_file": tmp_path / "em-token",
        "watttime_username": "metatune",
        "watttime_password_file": tmp_path / "wt-password",
        "carbon_aware_sdk_signal": "average",
        "intensity_retry_budget_s": 5.0,
        **overrides,
    }
    return ForecasterSettings(**values)  # type: ignore[arg-type]


def test_every_live_source_of_the_registry_can_be_built(tmp_path: Path) -> None:
    assert set(LIVE_SOURCES) == set(INTENSITY_SOURCES) - {"replay"}
    built = {name: intensity_source(name, settings(tmp_path)) for name in LIVE_SOURCES}
    assert {name: source.name for name, source in built.items()} == {n: n for n in LIVE_SOURCES}
    assert built["watttime"].signal is Signal.marginal
    assert built["electricity-maps"].signal is Signal.average
    assert built["carbon-aware-sdk"].signal is Signal.average  # as the setting says
    assert built["eia-930"].signal is Signal.average
    with pytest.raises(SourceMisconfigured, match="embedded default"):
        intensity_source("replay", settings(tmp_path))


@pytest.mark.parametrize(
    ("name", "override", "setting"),
    [
        (
            "electricity-maps",
            {"electricitymaps_token_file": None},
            "METATUNE_ELECTRICITYMAPS_TOKEN_FILE",
        ),
        (
            "electricity-maps",
            {"electricitymaps_token_file": Path("/nonexistent/em")},
            "METATUNE_ELECTRICITYMAPS_TOKEN_FILE",
        ),
        ("watttime", {"watttime_username": ""}, "METATUNE_WATTTIME_USERNAME"),
        ("watttime", {"watttime_password_file": None}, "METATUNE_WATTTIME_PASSWORD_FILE"),
    ],
)
def test_a_missing_credential_names_its_setting(
    tmp_path: Path, name: str, override: dict[str, object], setting: str
) -> None:
    with pytest.raises(SourceMisconfigured, match=setting):
        intensity_source(name, settings(tmp_path, **override))


@pytest.mark.asyncio
async def test_no_credential_in_any_log_line_message_or_repr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = FakeClock()

    def refuse(request: httpx.Request) -> httpx.Response:
        status = 400 if request.url.params["zone"] == "XX" else 401
        return httpx.Response(status, json={"error": f"bad {request.headers.get('auth-token')}"})

    def down(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/login":
            return httpx.Response(200, json={"token": "eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl"})
        return httpx.Response(503, text=f"echo {request.headers.get('authorization')}")

    config = settings(tmp_path)
    em = intensity_source(
        "electricity-maps", config, httpx.MockTransport(refuse), sleep=clock.sleep, clock=clock
    )
    wt = intensity_source(
        "watttime", config, httpx.MockTransport(down), sleep=clock.sleep, clock=clock
    )
    start, end = datetime(2023, 3, 1, tzinfo=UTC), datetime(2023, 3, 2, tzinfo=UTC)
    with pytest.raises(SourceMisconfigured) as refused:
        await em.observed("DE", start, end)
    with pytest.raises(ProviderUnavailable, match="HTTP 400") as echoed:  # the body echoes it
        await em.observed("XX", start, end)
    with pytest.raises(ProviderUnavailable) as unavailable:
        await wt.observed("CAISO_NORTH", start, end)
    assert caplog.records, "the retries were logged"
    shown = " ".join(
        [
            caplog.text,
            *map(str, (refused.value, echoed.value, unavailable.value)),
            repr(em),
            repr(wt),
            repr(config),
        ]
    )
    for secret in (TOKEN, PASSWORD, "eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl"):
        assert secret not in shown


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("120", now) == 120.0
    assert retry_after_s("Wed, 01 Jan 2025 12:00:30 GMT", now) == 30.0
    assert retry_after_s(None, now) is None and retry_after_s("soon", now) is None
