"""Solar geometry and the wind power curve behave like the physics they stand for."""

from __future__ import annotations

import numpy as np
import pandas as pd

from metatune_forecaster.domain.solar import clear_sky_ghi, cloudy_ghi, local_solar_hour
from metatune_forecaster.domain.wind import capacity_factor, hub_height_speed

FRANKFURT = (50.11, 8.68)
SYDNEY = (-33.87, 151.21)


def day(date: str) -> pd.DatetimeIndex:
    return pd.date_range(date, periods=24, freq="h", tz="UTC")


def test_clear_sky_peaks_near_local_solar_noon_and_is_zero_at_night() -> None:
    ghi = clear_sky_ghi(day("2023-06-21"), *FRANKFURT)
    assert ghi[0] == 0.0 and ghi[22] == 0.0
    assert int(np.argmax(ghi)) in (
        10,
        11,
    )  # 11:00-12:00 UTC is ~12:05-13:05 local solar time at 8.7° E
    assert 750 < ghi.max() < 1000


def test_seasons_are_opposite_in_the_two_hemispheres() -> None:
    june, december = day("2023-06-21"), day("2023-12-21")
    assert clear_sky_ghi(june, *FRANKFURT).sum() > 3 * clear_sky_ghi(december, *FRANKFURT).sum()
    assert clear_sky_ghi(december, *SYDNEY).sum() > 1.5 * clear_sky_ghi(june, *SYDNEY).sum()


def test_clouds_attenuate_and_local_solar_hour_follows_longitude() -> None:
    clear = np.array([800.0, 800.0, 800.0])
    assert list(cloudy_ghi(clear, np.array([0.0, 50.0, 100.0]))) == sorted(
        cloudy_ghi(clear, np.array([0.0, 50.0, 100.0])), reverse=True
    )
    assert cloudy_ghi(clear, np.array([100.0]))[0] == 200.0
    assert local_solar_hour(day("2023-01-01")[:1], 150.0)[0] == 10.0


def test_power_curve_is_zero_below_cut_in_rises_then_saturates_and_cuts_out() -> None:
    speeds = np.array([0.0, 2.9, 5.0, 8.0, 11.0, 12.0, 20.0, 26.0, np.nan])
    cf = capacity_factor(speeds)
    assert cf[0] == cf[1] == 0.0
    assert 0 < cf[2] < cf[3] < cf[4] < 1.0
    assert cf[5] == cf[6] == 1.0 and cf[7] == 0.0 and np.isnan(cf[8])
    assert hub_height_speed(np.array([5.0]))[0] > 5.0
