"""Solar geometry and irradiance: where the sun is, and how much of it reaches the ground.

Solar output drives the midday dip of carbon intensity on sunny grids; a clear-sky model from
solar geometry times a cloud-cover attenuation gives a usable irradiance wherever only cloud
cover is forecast (Open-Meteo's ``cloud_cover``, the replayed observations).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

_SOLAR_CONSTANT_WM2 = 1361.0


def _day_fraction(times: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """Day of year (1-based) and fractional UTC hour at the middle of each hourly interval."""
    doy = times.day_of_year.to_numpy(dtype=float)
    hour = times.hour.to_numpy(dtype=float) + times.minute.to_numpy(dtype=float) / 60.0 + 0.5
    return doy, hour


def cos_zenith(times: pd.DatetimeIndex, latitude: float, longitude: float) -> np.ndarray:
    """Cosine of the solar zenith angle at the middle of each hour (NOAA low-precision formulas)."""
    doy, hour = _day_fraction(times)
    gamma = 2 * np.pi / 365.0 * (doy - 1 + (hour - 12) / 24)
    decl = (
        0.006918
        - 0.399912 * np.cos(gamma)
        + 0.070257 * np.sin(gamma)
        - 0.006758 * np.cos(2 * gamma)
        + 0.000907 * np.sin(2 * gamma)
        - 0.002697 * np.cos(3 * gamma)
        + 0.00148 * np.sin(3 * gamma)
    )
    eqtime_min = 229.18 * (
        0.000075
        + 0.001868 * np.cos(gamma)
        - 0.032077 * np.sin(gamma)
        - 0.014615 * np.cos(2 * gamma)
        - 0.040849 * np.sin(2 * gamma)
    )
    solar_minutes = hour * 60 + eqtime_min + 4 * longitude
    hour_angle = np.deg2rad(solar_minutes / 4 - 180)
    lat = np.deg2rad(latitude)
    return np.asarray(np.sin(lat) * np.sin(decl) + np.cos(lat) * np.cos(decl) * np.cos(hour_angle))


def clear_sky_ghi(times: pd.DatetimeIndex, latitude: float, longitude: float) -> np.ndarray:
    """Global horizontal irradiance under a clear sky, W/m² (Haurwitz 1945)."""
    mu = np.clip(cos_zenith(times, latitude, longitude), 0.0, None)
    with np.errstate(divide="ignore", over="ignore"):
        ghi = 1098.0 * mu * np.exp(-0.057 / np.where(mu > 0, mu, np.inf))
    return np.where(mu > 0.01, ghi, 0.0)


def cloudy_ghi(clear_sky_wm2: np.ndarray, cloud_cover_pct: np.ndarray) -> np.ndarray:
    """Irradiance under ``cloud_cover_pct`` total cloud (Kasten & Czeplak 1980), W/m²."""
    cloud = np.clip(np.asarray(cloud_cover_pct, dtype=float) / 100.0, 0.0, 1.0)
    return clear_sky_wm2 * (1.0 - 0.75 * cloud**3.4)


def local_solar_hour(times: pd.DatetimeIndex, longitude: float) -> np.ndarray:
    """Mean local solar time in hours [0, 24): makes the hour of day comparable across zones."""
    _, hour = _day_fraction(times)
    return np.mod(hour - 0.5 + longitude / 15.0, 24.0)
