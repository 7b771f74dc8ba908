"""One region's hourly history: carbon intensity and weather on a gap-free UTC hour index."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .solar import clear_sky_ghi, cloudy_ghi

WEATHER_COLUMNS = ("temperature_c", "wind_ms", "cloud_pct", "ghi_wm2")


@dataclass(frozen=True)
class RegionSeries:
    """Hourly ``ci`` (gCO2eq/kWh) and weather for one grid region.

    ``frame`` has a gap-free hourly UTC index and the columns ``ci`` plus :data:`WEATHER_COLUMNS`
    (NaN where unknown). ``weather_is_forecast`` says whether the weather columns already are
    archived forecasts (CarbonCast GFS) or observations that must be degraded before a model may
    see them at a future hour.
    """

    name: str
    region: str
    latitude: float
    longitude: float
    frame: pd.DataFrame
    weather_is_forecast: bool = False

    def clear_sky(self) -> np.ndarray:
        return clear_sky_ghi(self.frame.index, self.latitude, self.longitude)

    def slice(
        self, start: pd.Timestamp | None = None, end: pd.Timestamp | None = None
    ) -> RegionSeries:
        """The rows with ``start <= time < end``."""
        index = self.frame.index
        mask = np.ones(len(index), dtype=bool)
        if start is not None:
            mask &= index >= start
        if end is not None:
            mask &= index < end
        return RegionSeries(
            self.name,
            self.region,
            self.latitude,
            self.longitude,
            self.frame[mask],
            self.weather_is_forecast,
        )


def regularise(frame: pd.DataFrame) -> pd.DataFrame:
    """Put ``frame`` on a complete hourly UTC index, adding any missing weather column as NaN."""
    frame = frame[~frame.index.duplicated(keep="last")].sort_index()
    full = pd.date_range(frame.index[0], frame.index[-1], freq="h", tz="UTC")
    frame = frame.reindex(full)
    for column in ("ci", *WEATHER_COLUMNS):
        if column not in frame:
            frame[column] = np.nan
    return frame[["ci", *WEATHER_COLUMNS]].astype(float)


def with_ghi(frame: pd.DataFrame, latitude: float, longitude: float) -> pd.DataFrame:
    """Fill ``ghi_wm2`` from cloud cover through the clear-sky model where it is missing."""
    clear = clear_sky_ghi(frame.index, latitude, longitude)
    estimated = cloudy_ghi(clear, frame["cloud_pct"].to_numpy())
    out = frame.copy()
    out["ghi_wm2"] = np.where(
        np.isnan(frame["ghi_wm2"].to_numpy()), estimated, frame["ghi_wm2"].to_numpy()
    )
    return out
