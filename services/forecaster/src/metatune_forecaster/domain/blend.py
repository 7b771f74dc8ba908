"""The provider's own forecast, where it has one, blended into the model's.

Some providers publish a forecast of their own (WattTime; Electricity Maps' paid tier; the
Carbon Aware SDK passes WattTime's on), usually a day or two ahead. For the hours it covers, the
median becomes the equal-weight mean of the provider's value and the model's; the model's
10-90 % offsets are kept around the new median (the provider gives a point forecast, no band),
and the hours after its last one are the model's alone, out to 168 h.

Blended, not replaced, because the forecaster bench says so. On the only published day-ahead
forecasts we can score (DACF, 2021H2, issued 00:00 UTC for the next 24 h), with a model trained
on CarbonCast's ten grids before 2021-07 (``bench/forecaster_bench.py --data <carboncast + dacf>
--train-until 2021-07-01 --test-from 2021-07-01 --test-until 2022-01-01``,
docs/results/forecaster_bench.dacf_blend.json), MAPE %, model / provider (= replace) / blend:
CISO 8.14 / 7.41 / **7.05**, ERCO 10.03 / **8.05** / 8.62, PJM 3.12 / 3.30 / **2.92**, SE
6.25 / 6.57 / **5.76**; mean 6.89 / 6.33 / **6.09**. The equal-weight mean beats both sides on
three grids of four and the model on all four: the provider's inputs (the operator's own
generation forecasts) and the model's (weather, the grid's recent behaviour) are different
information, so their errors partly cancel (the forecast-combination result of Bates & Granger
1969). Equal weights, not fitted ones: four grids and one half-year are too little to fit a
weight per provider without overfitting it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from metatune.contracts import CarbonForecast
from metatune.contracts.forecasts import HORIZON_HOURS

from .features import HISTORY_HOURS

PROVIDER_WEIGHT = 0.5  # weight of the provider's value in the blended median


def with_provider_forecast(
    forecast: CarbonForecast, own: pd.Series | None, weight: float = PROVIDER_WEIGHT
) -> CarbonForecast:
    """``forecast`` with the hours ``own`` covers blended (see the module doc); ``own`` is the
    provider's forecast on a tz-aware hourly index (other hours, NaN and negative values
    ignored). ``provider_hours`` counts the blended hours."""
    if own is None or own.empty:
        return forecast
    horizon = pd.date_range(pd.Timestamp(forecast.start), periods=HORIZON_HOURS, freq="h")
    index = pd.DatetimeIndex(own.index).tz_convert("UTC")
    values = pd.Series(own.to_numpy(dtype=float), index=index)
    values = values[~values.index.duplicated(keep="last")].reindex(horizon).to_numpy()
    covered = np.isfinite(values) & (values >= 0)
    if not covered.any():
        return forecast
    low, mid, high = (
        np.asarray(band, dtype=float)
        for band in (forecast.p10_g_per_kwh, forecast.g_per_kwh, forecast.p90_g_per_kwh)
    )
    new_mid = np.where(covered, weight * np.where(covered, values, 0.0) + (1 - weight) * mid, mid)
    new_low = np.clip(new_mid + (low - mid), 0.0, new_mid)
    new_high = np.maximum(new_mid + (high - mid), new_mid)
    return forecast.model_copy(
        update={
            "g_per_kwh": [round(float(v), 2) for v in new_mid],
            "p10_g_per_kwh": [round(float(v), 2) for v in new_low],
            "p90_g_per_kwh": [round(float(v), 2) for v in new_high],
            "provider_hours": int(covered.sum()),
        }
    )


SHORT_HISTORY_SHARE = 0.9  # a forecast from fewer observed hours of the window is flagged


def labelled(
    forecast: CarbonForecast,
    history: pd.Series,
    source: str,
    signal: str,
    own: pd.Series | None = None,
) -> CarbonForecast:
    """``forecast`` naming its ``source`` and ``signal``, how many observed hours of the 8-week
    window ``history`` held (``short_history`` below :data:`SHORT_HISTORY_SHARE` of them: a zone
    still building its history gets a forecast from what there is, flagged), and with the
    provider's own forecast ``own`` blended in where it has one."""
    start = pd.Timestamp(forecast.start)
    window = history[
        (history.index >= start - pd.Timedelta(hours=HISTORY_HOURS)) & (history.index < start)
    ]
    observed = int(window.notna().sum())
    described = forecast.model_copy(
        update={
            "source": source,
            "signal": str(signal),
            "history_hours": observed,
            "short_history": observed < SHORT_HISTORY_SHARE * HISTORY_HOURS,
        }
    )
    return with_provider_forecast(described, own)
