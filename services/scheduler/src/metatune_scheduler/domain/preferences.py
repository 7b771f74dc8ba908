"""What a job's carbon preference and the plan's hysteresis add to the price of an hour.

Every hour of job j at datacenter d in period t costs R_j * PUE_d * (C_{d,t} + price_j(t)) in
the model (:meth:`.Instance.hour_cost`), with m_t the period's middle offset from now:

* ``greenest``: price 0 (only the plan-wide tie-breaking delay premium, 0.03 g/kWh per hour):
  any delay up to the deadline that saves carbon is taken.
* ``balanced``: ``BALANCED_PREMIUM`` * m_t. Shifting a job one hour later adds the premium once
  for each kWh it uses, so the job is charged ``BALANCED_PREMIUM`` x its energy (kWh at the
  meter) in gCO2eq per hour of delay: a day's wait must buy at least 72 g/kWh, the median daily
  swing (max - min of a UTC day) of the 17 grids in the team's traces (2021-2023; from 10 g/kWh
  in Norway to 257 in New South Wales). So it waits for a deep daily trough or a much cleaner site
  nearby in time, not for a marginally cleaner hour tomorrow.
* ``fastest``: n_j * S * max(0, m_t - f_j) with n_j its hours, S the largest carbon difference
  between any two hours of the plan (:func:`fastest_price`) and f_j the offset of the job's
  earliest possible last hour (its first usable hour + n_j - 1): finishing an hour later costs
  more than moving every one of its hours to the cleanest hour could save, so the earliest finish
  always wins and carbon only breaks ties (which site, which hours before that finish). Hours
  inside the earliest window cost nothing extra, so the time price of a job that can start now
  does not inflate the objective (nor the solver's relative gap).

Hysteresis: a job whose previous plan started (or continues) it within ``NEAR_H`` hours keeps
those hours unless moving saves more than ``HYSTERESIS_SHARE`` of its emissions: each hour the
previous plan gave it (hourly periods) is credited ``HYSTERESIS_SHARE`` x the job's mean hourly
emissions there (at the current forecast), so a plan that moves all of it must save more than
that share of its emissions, and one that moves k of its n hours k/n of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metatune.contracts import CarbonPreference

BALANCED_PREMIUM = 3.0  # gCO2eq/kWh per hour of delay: the median daily swing (72 g/kWh) over 24 h
HYSTERESIS_SHARE = 0.05  # default share of its emissions a move of a near job must save (METATUNE_SCHEDULER_HYSTERESIS_SHARE)
NEAR_H = 6  # default hours ahead within which a planned start is held (METATUNE_SCHEDULER_HYSTERESIS_NEAR_H)


def fastest_price(pue: np.ndarray, intensity: np.ndarray) -> float:
    """S: the most one job-hour can save by moving, in g/kWh at the smallest PUE (the spread of
    PUE x intensity over every site and period); a fastest job of n hours pays n * S + 1 g/kWh
    for each hour beyond its earliest finish."""
    if not intensity.size:
        return 0.0
    scaled = pue[:, None] * intensity
    return float((scaled.max() - scaled.min()) / max(float(pue.min()), 1e-9))


def finish_price(need: int, spread: float) -> float:
    """g/kWh per hour a fastest job of ``need`` hours pays beyond its earliest finish."""
    return max(need, 1) * spread + 1.0


def time_prices(
    preferences: Sequence[CarbonPreference], need: np.ndarray, spread: float
) -> tuple[np.ndarray, np.ndarray]:
    """(J,) delay price (balanced) and (J,) finish price (fastest) of each job, g/kWh per hour."""
    delay = np.array(
        [BALANCED_PREMIUM if p is CarbonPreference.balanced else 0.0 for p in preferences]
    )
    finish = np.array(
        [
            finish_price(int(n), spread) if p is CarbonPreference.fastest else 0.0
            for p, n in zip(preferences, need, strict=True)
        ]
    )
    return delay, finish


def priced_hours(
    priced: np.ndarray,
    preference: CarbonPreference,
    begin: int,
    need: int,
    spread: float,
) -> np.ndarray:
    """(D, H) hourly prices ``priced`` (forecast plus the plan-wide premium) with one job's
    preference added, hour offsets from 0: what the fast path sorts hours by."""
    offsets = np.arange(priced.shape[1], dtype=float)
    if preference is CarbonPreference.balanced:
        return np.asarray(priced + BALANCED_PREMIUM * offsets[None, :])
    if preference is CarbonPreference.fastest:
        late = np.maximum(offsets - (begin + need - 1), 0.0)
        return np.asarray(priced + finish_price(need, spread) * late[None, :])
    return priced
