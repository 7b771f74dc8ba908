"""The scheduling MILP, defined once; :mod:`.pulp_builder` and :mod:`.highs_builder` build it.

Variables (only where ``usable > 0``; everything else is fixed at 0 by omission):

* ``x[j,d,t]`` integer in ``[0, usable[j,d,t]]``: hours job j runs at datacenter d in period
  t (binary in hourly periods);
* ``y[j,d]`` binary: datacenter d is job j's site in this plan;
  (an anticipated job's ``x`` and ``y`` are continuous: fluid expected demand, see
  :meth:`.Instance.integral`);
* ``u[j] >= 0``: hours of job j the plan cannot place before its deadline (priced far above
  any emissions, so non-zero only when the deadline cannot be met; for an anticipated job,
  one not requested yet, priced at the median of its usable hours, so it holds room only where that pays).

Minimise  sum R_j PUE_d C_{d,t} x[j,d,t] + sum switch_g[j,d] y[j,d] + sum penalty_j u[j]

subject to

* demand:   sum_{d,t} x[j,d,t] + u[j] = need[j]                (exactly the remaining hours)
* site:     sum_d y[j,d] <= 1                                  (one datacenter at a time; none
            for a job the plan places nowhere, which pays no switch_g: the cost every plan is priced
            at, :func:`total_cost`, and the column generation's, :mod:`.columns`)
* link:     sum_t x[j,d,t] <= need[j] * y[j,d]
* capacity: sum_j gpus[j] x[j,d,t] <= capacity[d,t] * length[t]  (GPU-hours of the period)
* power:    sum_j R_j x[j,d,t] <= power_cap[d] * length[t]      (only if a power cap is set)

One site per plan keeps the model at J*D*T + J*D columns; a job still migrates when a later
re-plan picks another site, paying ``switch_g`` (checkpoint transfer and restart) and the
transfer delay, so a move is chosen only when it pays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .instance import Instance


@dataclass(frozen=True)
class Layout:
    """Column order shared by both builders: x columns, then y columns, then u columns."""

    x_job: np.ndarray
    x_dc: np.ndarray
    x_period: np.ndarray
    x_upper: np.ndarray
    y_job: np.ndarray
    y_dc: np.ndarray
    jobs: int

    @classmethod
    def of(cls, instance: Instance) -> Layout:
        job, dc, period = np.nonzero(instance.usable)
        upper = instance.usable[job, dc, period]
        y_job, y_dc = np.nonzero(instance.usable.sum(axis=2) > 0)
        return cls(job, dc, period, upper, y_job, y_dc, len(instance.need))

    @property
    def n_x(self) -> int:
        return len(self.x_job)

    @property
    def n_y(self) -> int:
        return len(self.y_job)

    @property
    def n_cols(self) -> int:
        return self.n_x + self.n_y + self.jobs

    def integer_columns(self, instance: Instance) -> np.ndarray:
        """(n_cols,) bool: x and y columns of integral jobs; u columns are continuous."""
        integral = instance.integral()
        return np.concatenate(
            [integral[self.x_job], integral[self.y_job], np.zeros(self.jobs, dtype=bool)]
        )

    def costs(self, instance: Instance) -> np.ndarray:
        hour_cost = instance.hour_cost()[self.x_job, self.x_dc, self.x_period]
        switch = instance.switch_g[self.y_job, self.y_dc]
        unmet = instance.unmet_penalty()
        return np.concatenate([hour_cost, switch, unmet])

    def y_index_of_x(self) -> np.ndarray:
        """For every x column, the index (among y columns) of its (job, datacenter) pair."""
        n_dcs = int(max(self.x_dc.max(initial=-1), self.y_dc.max(initial=-1))) + 1
        key = self.y_job * n_dcs + self.y_dc
        return np.asarray(np.searchsorted(key, self.x_job * n_dcs + self.x_dc))


@dataclass(frozen=True)
class Solution:
    """Hours per x column and unmet hours per job, as the solver returned them (rounded)."""

    layout: Layout
    x: np.ndarray
    unmet: np.ndarray
    objective: float
    mip_gap: float | None
    seconds: float
    optimal: bool
    dual_bound: float | None = (
        None  # the solver's proven lower bound on the objective (None: unknown)
    )

    @classmethod
    def of_hours(cls, instance: Instance, hours: np.ndarray, seconds: float) -> Solution:
        """A solution read from a (J, D, T) hour grid (a heuristic's plan: no gap is known). Its
        columns are the grid's cells with hours, not every usable one: at 10,000 x 24 a plan has
        about 1 % of them, and listing the others cost seconds."""
        job, dc, period = np.nonzero(hours)
        y_job, y_dc = np.nonzero(hours.any(axis=2))
        layout = Layout(
            job, dc, period, instance.usable[job, dc, period], y_job, y_dc, len(instance.need)
        )
        x = hours[job, dc, period].astype(np.int64)
        unmet = np.maximum(instance.need - hours.sum(axis=(1, 2)), 0).astype(np.int64)
        return cls(layout, x, unmet, total_cost(instance, hours), None, seconds, False)

    def hours(self, shape: tuple[int, int, int]) -> np.ndarray:
        """(J, D, T) hours planned."""
        grid = np.zeros(shape, dtype=np.int64)
        grid[self.layout.x_job, self.layout.x_dc, self.layout.x_period] = self.x
        return grid


def objective_of(instance: Instance, hours: np.ndarray) -> float:
    """Emissions (gCO2eq) of a (J, D, T) hour grid, with the switch cost of each used site."""
    used = hours.sum(axis=2) > 0
    return float((instance.hour_cost() * hours).sum() + (instance.switch_g * used).sum())


def total_cost(instance: Instance, hours: np.ndarray) -> float:
    """Emissions of ``hours`` plus the penalty of the hours it leaves unplaced."""
    unmet = np.maximum(instance.need - hours.sum(axis=(1, 2)), 0)
    return objective_of(instance, hours) + float(instance.unmet_penalty() @ unmet)
