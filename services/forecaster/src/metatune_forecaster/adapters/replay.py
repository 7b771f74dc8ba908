"""The embedded default: a replay of one recorded year of real carbon intensity and weather.

The extract (data/replay.parquet, see data/PROVENANCE.md) holds 52 weeks of 2023. Any
(simulated or real) time is mapped onto it modulo 52 weeks, which keeps the weekday and,
within a day or so, the season. Past hours replay the observed values; future hours replay the
observed weather degraded to forecast quality (:mod:`..domain.weather_error`), with an error that
grows with lead time and is drawn reproducibly from the region and issue time. A region the
extract has no weather for (one the registry adds) gets none: its forecast is made from history.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from ..domain.forecast import WEATHER_INPUTS
from ..domain.providers import ProviderUnavailable, Signal, Site
from ..domain.weather_error import WeatherErrorModel
from .package_data import REPLAY_PATH

REPLAY_START = pd.Timestamp("2023-01-01", tz="UTC")
REPLAY_DAYS = 364  # 52 whole weeks: weekdays line up when the replay wraps


class ReplayData:
    """The extract, one hourly frame per region, indexed by position in the replay year."""

    def __init__(self, path: Path = REPLAY_PATH) -> None:
        extract = pd.read_parquet(path)
        self._frames = {
            str(region): frame.set_index("datetime_utc")
            .drop(columns="region")
            .astype(float)
            .sort_index()
            for region, frame in extract.groupby("region", observed=True)
        }

    def regions(self) -> list[str]:
        return sorted(self._frames)

    def rows(self, region: str, start: datetime, hours: int) -> pd.DataFrame:
        """``hours`` rows from ``start`` on, replayed cyclically and re-indexed to the asked times."""
        frame = self._frames.get(region)
        if frame is None:
            raise ProviderUnavailable(f"the replay extract has no region {region!r}")
        period = REPLAY_DAYS * 24
        offset = int((pd.Timestamp(start) - REPLAY_START) // pd.Timedelta(hours=1)) % period
        positions = (offset + np.arange(hours)) % period
        rows = frame.iloc[positions].copy()
        rows.index = pd.date_range(pd.Timestamp(start), periods=hours, freq="h")
        return rows


class ReplayIntensity:
    name = "replay"

    def __init__(self, data: ReplayData) -> None:
        self.data = data

    def regions(self) -> list[str]:
        return self.data.regions()

    async def history(self, region: str, issue: datetime, hours: int) -> pd.Series:
        start = pd.Timestamp(issue) - pd.Timedelta(hours=hours)
        return self.data.rows(region, start, hours)["ci_g_per_kwh"]

    def source_of(self, region: str) -> tuple[str, Signal]:
        return self.name, Signal.average  # Electricity Maps' direct (average) intensity

    async def provider_forecast(self, region: str, issue: datetime, hours: int) -> pd.Series | None:
        return None  # a replay has no forecast of its own


class ReplayWeather:
    name = "replay"

    def __init__(self, data: ReplayData, error_model: WeatherErrorModel) -> None:
        self.data = data
        self.error_model = error_model

    async def hourly(
        self, site: Site, issue: datetime, past_hours: int, future_hours: int
    ) -> pd.DataFrame:
        start = pd.Timestamp(issue) - pd.Timedelta(hours=past_hours)
        if site.region not in self.data.regions():
            # no weather recorded for the region: every input unknown, so the model forecasts from
            # history and calendar alone and lists all its hours as imputed (domain/forecast.py)
            index = pd.date_range(start, periods=past_hours + future_hours, freq="h")
            return pd.DataFrame(np.nan, index=index, columns=list(WEATHER_INPUTS))
        rows = self.data.rows(site.region, start, past_hours + future_hours)
        weather = rows[list(WEATHER_INPUTS)].copy()
        future = weather.iloc[past_hours:]
        seed = int.from_bytes(
            hashlib.sha256(f"{site.region}|{pd.Timestamp(issue).isoformat()}".encode()).digest()[
                :8
            ],
            "big",
        )
        temperature, wind, cloud = (
            future[c].to_numpy()[None, :] for c in ("temperature_c", "wind_ms", "cloud_pct")
        )
        degraded = self.error_model.degrade(temperature, wind, cloud, np.random.default_rng(seed))
        weather.iloc[past_hours:] = np.column_stack([column[0] for column in degraded])
        return weather
