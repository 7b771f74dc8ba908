"""Wind speed at hub height and a generic turbine power curve.

Wind output is roughly cubic in wind speed between cut-in and rated speed and flat above it, so
the capacity factor predicts wind generation far better than the raw 10 m wind speed.
"""

from __future__ import annotations

import numpy as np

HUB_HEIGHT_M = 100.0
SHEAR_EXPONENT = 1 / 7  # neutral-stability power law
CUT_IN_MS = 3.0
RATED_MS = 12.0
CUT_OUT_MS = 25.0


def hub_height_speed(speed_10m_ms: np.ndarray, hub_height_m: float = HUB_HEIGHT_M) -> np.ndarray:
    """Extrapolate a 10 m wind speed to hub height with the 1/7 power law."""
    speed = np.asarray(speed_10m_ms, dtype=float)
    return np.asarray(speed * (hub_height_m / 10.0) ** SHEAR_EXPONENT)


def capacity_factor(hub_speed_ms: np.ndarray) -> np.ndarray:
    """Fraction of rated power (0..1) of a generic modern turbine at ``hub_speed_ms``; NaN stays NaN."""
    v = np.asarray(hub_speed_ms, dtype=float)
    ramp = (v**3 - CUT_IN_MS**3) / (RATED_MS**3 - CUT_IN_MS**3)
    cf = np.where(
        v < CUT_IN_MS, 0.0, np.where(v < RATED_MS, ramp, np.where(v < CUT_OUT_MS, 1.0, 0.0))
    )
    return np.where(np.isnan(v), np.nan, cf)
