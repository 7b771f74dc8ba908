"""Observed weather degraded to forecast quality, with an error that grows with lead time.

A model trained or evaluated on observed weather at the target hour would be a
perfect-prognosis upper bound. Instead the observed temperature, wind speed and cloud cover
get an error whose standard deviation grows like ``sqrt(lead / reference_lead)`` (error
variance growing linearly with lead, the usual short-to-medium-range behaviour), capped at
``cap_factor`` times the reference value, and which is correlated from one lead to the next
(AR(1)), as real forecast errors are. The reference values are measured by
:func:`calibrate` on the archived GFS forecasts of ``carboncast/`` against the observed weather
of the same grids.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from .series import RegionSeries

REFERENCE_LEAD_H = 48.0  # CarbonCast used day-ahead to 96 h GFS forecasts: their mean lead


class WeatherErrorModel(BaseModel):
    """Standard deviations of the forecast error at ``reference_lead_h``; °C, m/s, percentage points."""

    reference_lead_h: float = Field(REFERENCE_LEAD_H, gt=0)
    temperature_sigma_c: float = Field(ge=0)
    wind_sigma_ms: float = Field(ge=0)
    cloud_sigma_pct: float = Field(ge=0)
    lag1_correlation: float = Field(
        ge=0, lt=1, description="correlation of the error between consecutive leads"
    )
    cap_factor: float = Field(2.0, ge=1)
    source: str = Field(description="how the values were measured")

    def growth(self, leads: np.ndarray) -> np.ndarray:
        return np.minimum(
            np.sqrt(np.asarray(leads, dtype=float) / self.reference_lead_h), self.cap_factor
        )

    def noise(self, n_issues: int, horizon: int, rng: np.random.Generator) -> np.ndarray:
        """Unit-variance AR(1) paths over the leads, shape (3, n_issues, horizon)."""
        phi = self.lag1_correlation
        shocks = rng.standard_normal((3, n_issues, horizon))
        paths = np.empty_like(shocks)
        paths[..., 0] = shocks[..., 0]
        for h in range(1, horizon):
            paths[..., h] = phi * paths[..., h - 1] + np.sqrt(1 - phi**2) * shocks[..., h]
        return paths

    def degrade(
        self,
        temperature_c: np.ndarray,
        wind_ms: np.ndarray,
        cloud_pct: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Forecast-quality (temperature, wind speed, cloud cover) from observations shaped
        (n_issues, horizon), where column ``h`` is lead ``h + 1``."""
        n_issues, horizon = temperature_c.shape
        growth = self.growth(np.arange(1, horizon + 1))
        z = self.noise(n_issues, horizon, rng) * growth
        temperature = temperature_c + self.temperature_sigma_c * z[0]
        wind = np.maximum(wind_ms + self.wind_sigma_ms * z[1], 0.0)
        cloud = np.clip(cloud_pct + self.cloud_sigma_pct * z[2], 0.0, 100.0)
        return temperature, wind, cloud


def _residual(forecast: np.ndarray, observed: np.ndarray) -> tuple[float, float]:
    """Std and lag-1 autocorrelation of what a linear map of the forecast leaves unexplained."""
    ok = np.isfinite(forecast) & np.isfinite(observed)
    slope, intercept = np.polyfit(forecast[ok], observed[ok], 1)
    residual = np.where(ok, observed - (slope * forecast + intercept), np.nan)
    a, b = residual[:-1], residual[1:]
    both = np.isfinite(a) & np.isfinite(b)
    return float(np.nanstd(residual)), float(np.corrcoef(a[both], b[both])[0, 1])


def calibrate(
    pairs: list[tuple[RegionSeries, RegionSeries]], cloud_sigma_pct: float
) -> WeatherErrorModel:
    """Measure the forecast error on (GFS forecast series, observed series) pairs of one grid.

    The residual of the observation regressed on the forecast over their common hours includes
    the mismatch between GFS's area mean and the single observation point, so the error is an
    upper bound: the degraded weather is, if anything, worse than a real forecast. GFS carries no
    cloud cover, so the cloud error is given (``cloud_sigma_pct``) rather than measured.
    """
    temperature, wind, correlation = [], [], []
    for forecast, observed in pairs:
        joined = forecast.frame.join(observed.frame, how="inner", lsuffix="_fc")
        t_sigma, t_rho = _residual(
            joined["temperature_c_fc"].to_numpy(), joined["temperature_c"].to_numpy()
        )
        w_sigma, w_rho = _residual(joined["wind_ms_fc"].to_numpy(), joined["wind_ms"].to_numpy())
        temperature.append(t_sigma)
        wind.append(w_sigma)
        correlation += [t_rho, w_rho]
    names = ", ".join(f"{f.name}~{o.name}" for f, o in pairs)
    return WeatherErrorModel(
        temperature_sigma_c=round(float(np.mean(temperature)), 3),
        wind_sigma_ms=round(float(np.mean(wind)), 3),
        cloud_sigma_pct=cloud_sigma_pct,
        lag1_correlation=round(float(np.clip(np.mean(correlation), 0.0, 0.99)), 3),
        source=f"GFS forecast vs observed, residual of a linear fit, mean over {names}",
    )
