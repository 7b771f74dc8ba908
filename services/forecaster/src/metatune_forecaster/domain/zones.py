"""Approximate coordinates of grid regions, for solar geometry and local time.

The weather point of each Electricity Maps zone in the replay extract, and a representative
centre for the CarbonCast balancing areas and other common zones. A region that is not listed
gets its longitude from the daily temperature cycle (see :func:`infer_coordinates`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ZONE_COORDINATES: dict[str, tuple[float, float]] = {
    # Electricity Maps zones (weather points of the em_weather extract where there is one)
    "AU-NSW": (-33.85, 151.20),
    "AU-VIC": (-37.79, 144.94),
    "AU-QLD": (-27.47, 153.03),
    "AU-SA": (-34.93, 138.60),
    "BR-CS": (-23.52, -46.61),
    "CA-ON": (43.69, -79.41),
    "CA-QC": (46.81, -71.21),
    "CL-SEN": (-33.43, -70.64),
    "DE": (50.09, 8.65),
    "GB": (51.49, -0.16),
    "IN-WE": (19.09, 72.85),
    "JP-TK": (35.68, 139.81),
    "JP-KN": (34.69, 135.50),
    "KR": (37.58, 126.96),
    "SG": (1.30, 103.86),
    "US-CAL-CISO": (37.43, -121.96),
    "US-MIDA-PJM": (39.97, -75.17),
    "US-TEX-ERCO": (32.79, -96.82),
    "US-NY-NYIS": (40.71, -74.01),
    "US-NE-ISNE": (42.36, -71.06),
    "US-MIDW-MISO": (41.88, -87.63),
    "US-NW-BPAT": (45.52, -122.68),
    "US-SW-EPE": (31.76, -106.49),
    "ZA": (-26.19, 28.03),
    "ES": (40.42, -3.70),
    "NO": (59.91, 10.75),
    "FR": (48.86, 2.35),
    "NL": (52.37, 4.90),
    "BE": (50.85, 4.35),
    "PL": (52.23, 21.01),
    "IT-NO": (45.46, 9.19),
    "AT": (48.21, 16.37),
    "CH": (46.95, 7.45),
    "DK-DK1": (56.16, 10.20),
    "DK-DK2": (55.68, 12.57),
    "SE": (59.33, 18.07),
    "SE-SE3": (59.33, 18.07),
    "FI": (60.17, 24.94),
    "IE": (53.35, -6.26),
    "PT": (38.72, -9.14),
    "CZ": (50.08, 14.44),
    "NZ": (-41.29, 174.78),
    "MX": (19.43, -99.13),
    "IN-NO": (28.61, 77.21),
    "TW": (25.03, 121.57),
    "HK": (22.32, 114.17),
    # CarbonCast balancing areas / countries (centre of the area)
    "CISO": (37.0, -120.0),
    "ERCO": (31.0, -99.0),
    "PJM": (40.0, -78.0),
    "MISO": (40.0, -90.0),
    "EPE": (31.8, -106.4),
}


def infer_coordinates(
    times: pd.DatetimeIndex, temperature_c: np.ndarray
) -> tuple[float, float] | None:
    """Guess (latitude, longitude) of an unlisted region from its observed temperature.

    The mean daily maximum falls about 1.7 h after local solar noon, which gives the longitude to
    within ~15°; the sign of the July-minus-January temperature gives the hemisphere, and 40°
    stands in for the latitude. Returns None without enough temperature data.
    """
    series = pd.Series(temperature_c, index=times).dropna()
    if len(series) < 24 * 30:
        return None
    profile = series.groupby(series.index.hour).mean()
    angle = np.angle(
        np.sum(profile.to_numpy() * np.exp(2j * np.pi * profile.index.to_numpy() / 24))
    )
    peak_utc_hour = (angle / (2 * np.pi) * 24) % 24
    longitude = ((12.0 + 1.7 - peak_utc_hour) * 15.0 + 180.0) % 360.0 - 180.0
    by_month = series.groupby(series.index.month).mean()
    hemisphere = 1.0 if by_month.get(7, 0.0) >= by_month.get(1, 0.0) else -1.0
    return 40.0 * hemisphere, float(longitude)
