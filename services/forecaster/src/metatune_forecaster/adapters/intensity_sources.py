"""Build the live intensity source a registry entry names, from settings.

``intensity_source(name, settings)`` reads the credentials from the files the settings name
(like the other secrets: a path in the environment, the secret in a file), wraps them so no repr,
log line or message shows them, and gives the source its base URL and retry policy. A source that
cannot be built (no credential file set, an unreadable one) is a :class:`SourceMisconfigured`
naming the setting to fix. ``replay`` is not built here: it is the forecaster's embedded
:class:`~.replay.ReplayIntensity`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from pydantic import SecretStr

from metatune.registry import INTENSITY_SOURCES

from ..domain.providers import EmissionFactors, IntensitySource, Signal, SourceMisconfigured
from ..settings import ForecasterSettings
from .carbon_aware_sdk import CarbonAwareSdkSource
from .eia930 import KEY_SETTING as EIA_KEY_SETTING
from .eia930 import Eia930Source
from .electricity_maps import TOKEN_SETTING, ElectricityMapsSource
from .provider_http import ProviderHttp, Sleep
from .uk_carbon_intensity import UkCarbonIntensitySource
from .watttime import CREDENTIAL_SETTINGS, WattTimeSource

LIVE_SOURCES = tuple(name for name in INTENSITY_SOURCES if name != "replay")


def read_secret(path: Path | None, setting: str, what: str) -> SecretStr:
    """The stripped content of ``path``; a one-line :class:`SourceMisconfigured` naming
    ``setting`` when it is unset, unreadable or empty."""
    if path is None:
        raise SourceMisconfigured(f"{what} is not set: set {setting} to a file that holds it")
    try:
        secret = Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise SourceMisconfigured(
            f"{what} cannot be read from {setting} ({type(exc).__name__})"
        ) from None
    if not secret:
        raise SourceMisconfigured(f"{what} file named by {setting} is empty")
    return SecretStr(secret)


def intensity_source(
    name: str,
    settings: ForecasterSettings,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> IntensitySource:
    """The live source ``name`` (one of :data:`LIVE_SOURCES`) configured from ``settings``;
    ``transport``, ``sleep`` and ``clock`` are the test seams."""

    def http(
        provider: str, url: str, setting: str, query_secret: tuple[str, SecretStr] | None = None
    ) -> ProviderHttp:
        return ProviderHttp(
            provider,
            url,
            setting,
            timeout_s=settings.intensity_timeout_s,
            budget_s=settings.intensity_retry_budget_s,
            initial_s=settings.intensity_retry_initial_s,
            max_delay_s=settings.intensity_retry_max_s,
            transport=transport,
            sleep=sleep,
            clock=clock,
            query_secret=query_secret,
        )

    if name == "electricity-maps":
        setting = TOKEN_SETTING
        token = read_secret(
            settings.electricitymaps_token_file, setting, "the Electricity Maps token"
        )
        return ElectricityMapsSource(
            token,
            http("Electricity Maps", settings.electricitymaps_url, setting),
            forecast=settings.electricitymaps_forecast,
            factors=EmissionFactors(settings.emission_factors),
        )
    if name == "watttime":
        if not settings.watttime_username:
            raise SourceMisconfigured(
                "the WattTime user is not set: set METATUNE_WATTTIME_USERNAME"
            )
        password = read_secret(
            settings.watttime_password_file,
            "METATUNE_WATTTIME_PASSWORD_FILE",
            "the WattTime password",
        )
        return WattTimeSource(
            settings.watttime_username,
            password,
            http("WattTime", settings.watttime_url, CREDENTIAL_SETTINGS),
            clock=clock,
        )
    if name == "uk-carbon-intensity":
        return UkCarbonIntensitySource(
            http(
                "Carbon Intensity API",
                settings.uk_carbon_intensity_url,
                "METATUNE_UK_CARBON_INTENSITY_URL",
            ),
            forecast=settings.uk_carbon_intensity_forecast,
        )
    if name == "eia-930":
        key = read_secret(settings.eia_api_key_file, EIA_KEY_SETTING, "the EIA API key")
        return Eia930Source(http("EIA", settings.eia_url, EIA_KEY_SETTING, ("api_key", key)))
    if name == "carbon-aware-sdk":
        return CarbonAwareSdkSource(
            http(
                "Carbon Aware SDK", settings.carbon_aware_sdk_url, "METATUNE_CARBON_AWARE_SDK_URL"
            ),
            Signal(settings.carbon_aware_sdk_signal),
            EmissionFactors(settings.carbon_aware_sdk_factors),
        )
    raise SourceMisconfigured(
        f"no live intensity source {name!r}; known: {', '.join(LIVE_SOURCES)}"
        + (" (replay is the forecaster's embedded default)" if name == "replay" else "")
    )
