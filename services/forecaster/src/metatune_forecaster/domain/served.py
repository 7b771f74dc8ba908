"""The forecasts the service would have served at past issue times, for back-tests.

One code path for every back-test (the forecaster's benchmark, the scheduler's carbon benchmark
driven by forecasts): the trees' 168 h forecasts at each issue, then the issue-time recalibration
of domain/recent.py fitted on that issue's own last four weeks, both in g/kWh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .features import RegionArrays
from .model import CarbonModel
from .recent import Recalibration, backtest, past_issues
from .weather_error import WeatherErrorModel

Band = tuple[np.ndarray, np.ndarray, np.ndarray]  # p10, median, p90


@dataclass(frozen=True)
class ServedForecasts:
    """Rows (issue position, lead hour) with the trees alone and the recalibrated forecast."""

    issue: np.ndarray
    lead: np.ndarray
    static: Band
    recalibrated: Band

    def matrix(self, issues: np.ndarray, horizon: int = 168, band: int = 1) -> np.ndarray:
        """One recalibrated band (0: p10, 1: median, 2: p90) as an (issues, horizon) array,
        NaN where an issue had none."""
        out = np.full((len(issues), horizon), np.nan)
        row = np.searchsorted(issues, self.issue)
        found = (row < len(issues)) & (issues[np.minimum(row, len(issues) - 1)] == self.issue)
        out[row[found], self.lead[found] - 1] = self.recalibrated[band][found]
        return out


def served_forecasts(
    model: CarbonModel,
    arrays: RegionArrays,
    issues: np.ndarray,
    error_model: WeatherErrorModel,
    seed: int,
) -> ServedForecasts:
    """The 168 h forecasts at ``issues`` (positions in ``arrays``) as the service issues them:
    recalibrated at each issue on re-forecasts of the four weeks before it, scored only on hours
    observed by then. Issues without enough history are left out."""
    issues = np.asarray(issues, dtype=np.int64)
    needed = np.concatenate([issues, *(past_issues(int(i)) for i in issues)])
    forecasts = backtest(model, arrays, needed, error_model, np.random.default_rng(seed))
    test = np.isin(forecasts.issue, issues)
    issue, lead, base = forecasts.issue[test], forecasts.lead[test], forecasts.base[test]
    static = forecasts.low[test], forecasts.mid[test], forecasts.high[test]
    low, mid, high = (v.copy() for v in static)
    for i in np.unique(issue):
        rows = issue == i
        recalibration = Recalibration.learn(forecasts.scored_before(int(i)))
        low[rows], mid[rows], high[rows] = recalibration.apply(
            static[0][rows], static[1][rows], static[2][rows], base[rows], lead[rows]
        )
    scale = arrays.scale(issue)
    return ServedForecasts(
        issue, lead, tuple(v * scale for v in static), (low * scale, mid * scale, high * scale)
    )
