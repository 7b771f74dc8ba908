"""Back-tested forecasts as the service serves them: aligned to their issues, recalibrated, in g/kWh."""

from __future__ import annotations

import numpy as np
import pandas as pd

from metatune_forecaster.adapters.carbon_folder import load_em
from metatune_forecaster.adapters.model_files import load_weather_error
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.domain.features import RegionArrays
from metatune_forecaster.domain.model import CarbonModel
from metatune_forecaster.domain.served import served_forecasts
from tests.support.plugin import TEST_DATA


def test_served_forecasts_line_up_with_their_issue_hours(
    model: CarbonModel,
) -> None:
    arrays = RegionArrays(load_em(TEST_DATA / "carbon", "DE"))
    first = arrays.times.get_loc(pd.Timestamp("2023-03-01", tz="UTC"))
    issues = np.array([first, first + 7, first + 30])
    served = served_forecasts(model, arrays, issues, load_weather_error(WEATHER_ERROR_PATH), seed=0)

    matrix = served.matrix(np.array([first - 1, *issues]))
    assert np.isnan(matrix[0]).all()  # not asked for: no row
    assert np.isfinite(matrix[1:]).all() and matrix.shape == (4, 168)
    low, mid, high = served.recalibrated
    assert np.all(low <= mid + 1e-9) and np.all(mid <= high + 1e-9)
    # in g/kWh, near the hours they forecast (a forecast for Germany, not a ratio)
    actual = arrays.y[issues[:, None] + np.arange(168)[None, :]]
    assert 0.6 < np.median(matrix[1:] / actual) < 1.4
    # the recalibration was fitted per issue: it changed the trees' medians somewhere
    assert not np.allclose(served.static[1], mid)
