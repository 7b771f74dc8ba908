"""Electricity Maps' hourly CSV export (the yearly files of its data portal) as observed hours.

Two layouts are read: the portal's own (``Datetime (UTC)``, ``Zone Id``, ``Carbon Intensity
gCO₂eq/kWh (direct)`` ... ; later vintages spell ``Zone id``, ``Carbon intensity gCO₂eq/kWh
(direct)`` and ``Life cycle``) and the renamed one of the team's ``carbon/em_hourly`` files
(``datetime_utc``, ``zone_id``, ``ci_direct_g_per_kwh``). The *direct* intensity is imported: the
average, location-based figure the model was trained on and the replay serves (life-cycle
factors would put every zone on another level). Gzipped files are read as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..domain.observations import hourly

SOURCE = "electricity-maps-csv"


@dataclass(frozen=True)
class Export:
    """One file's hours: the zone it says it holds (None: no zone column) and the intensities."""

    zone: str | None
    intensity: pd.Series


def _column(columns: list[str], *wanted: str) -> str | None:
    """The first column whose lower-cased name contains every fragment of one of ``wanted``
    (fragments separated by ``|``)."""
    for option in wanted:
        fragments = option.split("|")
        for column in columns:
            if all(f in column.lower() for f in fragments):
                return column
    return None


def read_export(path: Path) -> Export:
    """Read an Electricity Maps hourly export; ValueError (one line, naming the file) when it is
    not one or holds a bad value."""
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{path}: not a readable CSV file ({exc})") from exc
    columns = [str(c) for c in frame.columns]
    time = _column(columns, "datetime (utc)", "datetime_utc")
    value = _column(columns, "carbon intensity|direct", "ci_direct_g_per_kwh")
    zone = _column(columns, "zone id", "zone_id")
    if time is None or value is None:
        raise ValueError(
            f"{path}: not an Electricity Maps hourly export (needs a 'Datetime (UTC)' and a "
            f"'Carbon Intensity gCO2eq/kWh (direct)' column; found {', '.join(columns[:8])})"
        )
    zones = sorted({z for z in frame[zone] if z}) if zone is not None else []
    if len(zones) > 1:
        raise ValueError(f"{path}: holds several zones ({', '.join(zones)}); import one at a time")
    times = pd.to_datetime(frame[time], utc=True, errors="coerce", format="mixed")
    if times.isna().any():
        row = int(times.isna().to_numpy().argmax())
        raise ValueError(f"{path}: row {row + 2}: unreadable time {frame[time].iloc[row]!r}")
    values = frame[value].replace("", float("nan"))
    try:
        series = hourly(pd.Series(values.to_numpy(), index=pd.DatetimeIndex(times)))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return Export(zones[0] if zones else None, series)
