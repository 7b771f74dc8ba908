"""Sites first, then timing: the planner's path for instances too large for the full MILP.

At 1000 jobs x 12 datacenters the full MILP does not close in seconds: its site variables'
LP relaxation is weak (jobs split across sites) and HiGHS spends its time in cuts and
heuristics (measured: a 65 s re-plan that ended above the greedy plan). Once every job's site
is fixed, what is left (when each job runs) is a transportation-like model whose LP
relaxation is almost integral (measured at 1000 x 12: 278 of 41,131 columns fractional) and
that dual simplex solves in about 0.3 s. So:

1. **Sites** are where the warm start has each job: the previous plan, completed greedily for
   new jobs (cheapest site with room, least flexible job first).
2. **Timing**: the LP relaxation with those sites fixed, each job offered only its cheapest
   hours there (:func:`_cheapest_hours`); its hours are rounded down and the few missing hours
   given in the cheapest periods with room; a job that no longer fits is re-placed greedily at
   any allowed site. The result is kept only if it beats the warm start.
3. **A priced restart** (:func:`priced_restart`): every job's site and hours chosen again,
   greedily, on emissions plus half the timing LP's capacity prices (so jobs leave the
   site-hours step 2 found congested); kept only if cheaper.

What it gives up against the full MILP: sites are never re-chosen jointly. Measured
(``bench/scheduler_scale_bench.py``): the gap to the best known plan and to the full model's
LP bound. Tried and dropped, both measured: moving jobs between sites by the timing LP's
capacity prices (the moves overfill the target sites), and a large-neighbourhood search
re-solving 12-80 jobs at a time with HiGHS (no improving move in 60 rounds on the greedy plan).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np

from .highs_builder import Relaxation, solve_relaxation
from .instance import Instance
from .model import total_cost

Fill = Callable[..., np.ndarray]  # fill(instance, grid, cost=None): completes a grid greedily


@dataclass(frozen=True)
class TimingResult:
    hours: np.ndarray  # (J, D, T) integer hours
    cost: float  # emissions plus the unmet penalty
    seconds: float
    prices: np.ndarray  # (D, T) the timing LP's capacity prices (gCO2eq per GPU-hour): where those sites are congested
    optimal: bool = (
        True  # False: the timing LP hit its time limit and ``hours`` are the start's, completed
    )


def fits(instance: Instance, hours: np.ndarray) -> bool:
    """``hours`` stays within every job's usable hours and every datacenter-period's capacity."""
    used = np.einsum("j,jdt->dt", instance.gpus, hours)
    room = instance.room()
    return bool((hours <= instance.usable).all() and (used <= room + 1e-9).all())


class SiteTimingSolver:
    """Owns one ``highspy.Highs`` for the timing LP; one solve at a time.

    ``time_limit_s`` bounds the LP: it grows with the jobs (measured, restricted to each job's
    cheapest hours: 0.27 s CPU at 1000 x 12, over 3.5 s at 10,000 x 24 on a loaded machine), and
    past the limit the warm start, completed greedily, stands. An LP of more than
    ``max_columns`` is not tried at all (the 10,000 x 24 re-plan's has 313,000 and hit a 5 s limit
    in every run): a re-plan that large costs building the instance and the greedy, not an LP
    that grows without bound."""

    def __init__(self, time_limit_s: float | None = None, max_columns: int = 150_000) -> None:
        self.time_limit_s = time_limit_s
        self.max_columns = max_columns
        self._highs = highspy.Highs()
        self._highs.setOptionValue("output_flag", False)
        self._highs.setOptionValue("solver", "simplex")
        self._highs.setOptionValue("random_seed", 0)

    def __getstate__(self) -> dict[str, Any]:
        """Only the limits travel (to a solver process); the ``Highs`` is rebuilt there."""
        return {"time_limit_s": self.time_limit_s, "max_columns": self.max_columns}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]  # unpickled: rebuild in place

    def solve(self, instance: Instance, start: np.ndarray, fill: Fill) -> TimingResult:
        """Re-time the integer plan ``start`` with its sites fixed; ``fill`` completes a grid."""
        began = time.perf_counter()
        hours, prices, optimal = self._retime(instance, start, fill)
        cost, start_cost = total_cost(instance, hours), total_cost(instance, start)
        if start_cost <= cost and fits(instance, start):
            hours, cost = start, start_cost
        return TimingResult(hours, cost, time.perf_counter() - began, prices, optimal)

    def retime(self, instance: Instance, grid: np.ndarray, fill: Fill) -> np.ndarray:
        """The best timing (LP, rounded, completed) of ``grid``'s sites under ``instance``'s
        hourly capacity, whether or not ``grid`` itself respects it."""
        return self._retime(instance, grid, fill)[0]

    def _retime(
        self, instance: Instance, grid: np.ndarray, fill: Fill
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        fixed = _cheapest_hours(_at_sites(instance, _sites_of(instance, grid)), grid)
        if int(np.count_nonzero(fixed.usable)) <= self.max_columns:
            relaxed = solve_relaxation(self._highs, fixed, self.time_limit_s)
            if relaxed.optimal:
                return fill(instance, _round(fixed, relaxed)), relaxed.capacity_price, True
        # too large, or out of time: the grid, completed
        return (
            fill(instance, np.minimum(grid, instance.usable)),
            np.zeros(instance.capacity.shape),
            False,
        )


PRICE_SHARE = 0.5  # of the timing LP's capacity prices a priced restart adds to each hour's cost


def priced_restart(instance: Instance, timed: TimingResult, fill: Fill) -> TimingResult:
    """Step 3: re-choose every job's site and hours greedily on emissions plus ``PRICE_SHARE`` of
    the prices ``timed`` found, and keep the cheaper of that and ``timed``. Measured on the scale
    benchmark's 1000 x 12 re-plan: 1865.9 -> 1858.3 kg for ~0.75 s (the best plan known there,
    1850.9 kg, comes from the same greedy at column generation's prices, which take minutes); in a
    scratch run on the same instance the full share of the prices over-corrected (1930.9 kg). The
    greedy plan is not re-timed by a second LP: on the same benchmark's cold plan and re-plan that
    LP never beat the greedy hours it started from, and cost 0.27 s CPU each time."""
    if not timed.optimal:  # no prices to restart from
        return timed
    began = time.perf_counter()
    cost = (
        instance.hour_cost() + PRICE_SHARE * instance.gpus[:, None, None] * timed.prices[None, :, :]
    )
    hours = fill(instance, np.zeros(instance.shape, dtype=np.int64), cost)
    seconds = timed.seconds + time.perf_counter() - began
    if (restart := total_cost(instance, hours)) < timed.cost - 1e-6:
        return TimingResult(hours, restart, seconds, timed.prices)
    return dataclasses.replace(timed, seconds=seconds)


def _sites_of(instance: Instance, grid: np.ndarray) -> np.ndarray:
    """Each job's site in ``grid``; a job without hours there gets its cheapest allowed site."""
    placed = grid.sum(axis=2)
    site = placed.argmax(axis=1)
    empty = placed.max(axis=1) == 0
    if empty.any():
        allowed = instance.usable.sum(axis=2) > 0
        per_hour = instance.hour_cost().min(axis=2, initial=np.inf, where=instance.usable > 0)
        site[empty] = np.where(allowed, per_hour + instance.switch_g, np.inf)[empty].argmin(axis=1)
    return np.asarray(site)


def _at_sites(instance: Instance, site: np.ndarray) -> Instance:
    keep = np.zeros(instance.shape[:2], dtype=bool)
    keep[np.arange(len(site)), site] = True
    return instance.with_usable(instance.usable * keep[:, :, None])


def _round(instance: Instance, relaxed: Relaxation) -> np.ndarray:
    """The LP's hours rounded down, then each job's missing hours where the LP had fractions of
    them (then the cheapest periods) if its site has room there; a job that cannot get them is emptied for the greedy fill to re-place."""
    layout = relaxed.layout
    grid = np.zeros(instance.shape, dtype=np.int64)
    whole = np.floor(relaxed.x + 1e-6)
    grid[layout.x_job, layout.x_dc, layout.x_period] = whole.astype(np.int64)
    fraction = np.zeros(instance.shape)
    fraction[layout.x_job, layout.x_dc, layout.x_period] = relaxed.x - whole
    length = instance.periods.length
    free = instance.capacity * length[None, :] - np.einsum("j,jdt->dt", instance.gpus, grid)
    cost = instance.hour_cost()
    missing = instance.need - grid.sum(axis=(1, 2))
    for j in np.nonzero(missing > 0)[0]:
        d = int(instance.usable[j].sum(axis=1).argmax())
        for t in np.lexsort((cost[j, d], -fraction[j, d])):  # where the LP half-placed it first
            spare = min(
                int(instance.usable[j, d, t] - grid[j, d, t]), int(free[d, t] // instance.gpus[j])
            )
            take = min(max(spare, 0), int(missing[j]))
            grid[j, d, t] += take
            free[d, t] -= take * instance.gpus[j]
            missing[j] -= take
            if missing[j] == 0:
                break
        if missing[j]:
            free += instance.gpus[j] * grid[j]
            grid[j] = 0
    return grid


TIMING_SLACK = 1.0  # the timing LP offers each job its (1 + this) x need + 2 cheapest hours


def _cheapest_hours(instance: Instance, grid: np.ndarray) -> Instance:
    """The sites-fixed ``instance`` with each job's hours restricted to its ``TIMING_SLACK``
    cheapest ones there, and those ``grid`` gives it: the hours a timing LP could want, in a
    third of the columns. Measured on the scale bench's 1000 x 12 re-plan: 30,800 columns instead
    of 90,000, the timing LP 0.30 s CPU instead of 0.87 s, the plan 1853.7 kg against 1858.3 kg
    with every hour offered (in scratch runs, slack 0.5: 1865.9 kg; 2: 1853.9 kg, LP 0.35 s)."""
    site = instance.usable.sum(axis=2).argmax(axis=1)
    jobs = np.arange(len(site))
    usable = instance.usable[jobs, site]  # (J, T): one site each
    cost = np.where(usable > 0, instance.hour_cost()[jobs, site], np.inf)
    offered = np.minimum((instance.need * (1 + TIMING_SLACK)).astype(np.int64) + 2, cost.shape[1])
    threshold = np.take_along_axis(np.sort(cost, axis=1), offered[:, None] - 1, axis=1)
    keep = (cost <= threshold) | (grid.sum(axis=1) > 0)
    return instance.with_usable(instance.usable * keep[:, None, :])
