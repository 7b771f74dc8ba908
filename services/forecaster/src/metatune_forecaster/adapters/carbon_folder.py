"""Read a folder laid out like the team's ``carbon/`` data (em_hourly + em_weather, carboncast).

Used by the training command and the benchmark, never by the running service (which replays
its committed extract). Every region found becomes one :class:`RegionSeries`:
``EM:<zone>`` (Electricity Maps CI with observed Open-Meteo weather) and ``CC:<region>``
(CarbonCast CI with archived GFS weather forecasts).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..domain.series import RegionSeries, regularise, with_ghi
from ..domain.zones import ZONE_COORDINATES, infer_coordinates

KELVIN = 273.15


def _read(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    frame.index = pd.DatetimeIndex(pd.to_datetime(frame.pop("datetime_utc"), utc=True)).floor("h")
    return frame


def _coordinates(region: str, frame: pd.DataFrame) -> tuple[float, float]:
    if region in ZONE_COORDINATES:
        return ZONE_COORDINATES[region]
    guess = infer_coordinates(frame.index, frame["temperature_c"].to_numpy())
    return guess if guess is not None else (40.0, 0.0)


def load_em(folder: Path, zone: str) -> RegionSeries:
    carbon = _read(folder / "em_hourly" / f"{zone}.csv.gz")
    frame = pd.DataFrame({"ci": carbon["ci_direct_g_per_kwh"]})
    weather_path = folder / "em_weather" / f"{zone}.csv.gz"
    if weather_path.exists():
        weather = _read(weather_path)
        weather = weather[~weather.index.duplicated()]
        frame = frame.join(
            pd.DataFrame(
                {
                    "temperature_c": weather["temperature_2m_c"],
                    "wind_ms": weather["wind_speed_10m_kmh"] / 3.6,
                    "cloud_pct": weather["cloud_cover_pct"],
                }
            ),
            how="left",
        )
    frame = regularise(frame)
    latitude, longitude = _coordinates(zone, frame)
    return RegionSeries(
        f"EM:{zone}", zone, latitude, longitude, with_ghi(frame, latitude, longitude)
    )


def load_carboncast(folder: Path, region: str) -> RegionSeries:
    raw = _read(folder / "carboncast" / f"{region}.csv.gz")
    # dswrf is a 3-hour interval mean ending at its timestamp: generation in hour t tracks dswrf(t+1).
    frame = pd.DataFrame(
        {
            "ci": raw["ci_direct_g_per_kwh"],
            "temperature_c": raw["gfs_temperature_k"] - KELVIN,
            "wind_ms": raw["gfs_wind_speed_ms"],
            "ghi_wm2": raw["gfs_dswrf_wm2"].shift(-1),
        }
    )
    frame = regularise(frame)
    latitude, longitude = _coordinates(region, frame)
    return RegionSeries(
        f"CC:{region}", region, latitude, longitude, frame, weather_is_forecast=True
    )


def load_folder(
    folder: Path, sources: tuple[str, ...] = ("em", "carboncast")
) -> list[RegionSeries]:
    """Every region of the folder, EM first, sorted by name."""
    folder = Path(folder)
    series: list[RegionSeries] = []
    if "em" in sources and (folder / "em_hourly").is_dir():
        for path in sorted((folder / "em_hourly").glob("*.csv.gz")):
            series.append(load_em(folder, path.name.removesuffix(".csv.gz")))
    if "carboncast" in sources and (folder / "carboncast").is_dir():
        for path in sorted((folder / "carboncast").glob("*.csv.gz")):
            series.append(load_carboncast(folder, path.name.removesuffix(".csv.gz")))
    if not series:
        raise FileNotFoundError(f"no em_hourly/ or carboncast/ *.csv.gz files under {folder}")
    return series
