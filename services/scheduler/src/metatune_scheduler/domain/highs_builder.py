"""The model of :mod:`.model` built straight from numpy arrays into one persistent HiGHS solver.

PuLP hands HiGHS the model row by row and drops warm starts; here the constraint matrix is
assembled in one vectorised pass (CSC), the same ``highspy.Highs`` object is reused for every
re-plan, and the previous plan is passed as a starting solution.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
from scipy import sparse

from .instance import Instance
from .model import Layout, Solution


@dataclass(frozen=True)
class SolveLimits:
    """``presolve`` is off by default: on these models HiGHS's presolve costs more than it
    saves (measured 2-10x slower re-plans on the carbon benchmark's instances)."""

    time_limit_s: float = 10.0
    mip_rel_gap: float = 0.01
    threads: int = 0  # 0: HiGHS decides
    presolve: bool = False


def run_for(highs: highspy.Highs, seconds: float | None) -> None:
    """``highs.run()`` stopped after ``seconds`` of this run (None: no limit). HiGHS compares its
    ``time_limit`` with the run time the object has summed over all its runs (``getRunTime``),
    not this run's, so a long-lived solver given a fixed limit stops every run at once after its
    first seconds of solving (tests/scheduler/test_time_limit.py). Measured: the scale bench's
    re-plan LP answered "time limit" after 0 iterations; a planner kept across re-plans (the
    carbon bench's month, the runtime's worker-thread mode) lost its MILP and timing LP after its
    first 2-5 s of solving; the solver process was spared (it unpickles new solvers per solve)."""
    limit = np.inf if seconds is None else highs.getRunTime() + float(seconds)
    highs.setOptionValue("time_limit", float(limit))
    highs.run()


class HighsModelSolver:
    """Owns one ``highspy.Highs``; not thread-safe: one solve at a time."""

    def __init__(self, limits: SolveLimits = SolveLimits()) -> None:
        self.limits = limits
        self._highs = highspy.Highs()
        self._highs.setOptionValue("output_flag", False)
        self._highs.setOptionValue("random_seed", 0)
        self._highs.setOptionValue("presolve", "on" if limits.presolve else "off")
        if limits.threads:
            self._highs.setOptionValue("threads", limits.threads)

    def __getstate__(self) -> dict[str, Any]:
        """Only the limits travel (to a solver process); the ``Highs`` is rebuilt there."""
        return {"limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["limits"])  # type: ignore[misc]  # unpickled: rebuild the Highs in place

    def solve(
        self, instance: Instance, start: np.ndarray | None = None, time_limit_s: float | None = None
    ) -> Solution:
        """Solve ``instance``; ``start`` is a (J, D, T) hour grid to warm-start from."""
        began = time.perf_counter()
        layout = Layout.of(instance)
        highs = self._highs
        highs.clearModel()
        highs.clearSolver()
        highs.setOptionValue("mip_rel_gap", float(self.limits.mip_rel_gap))
        highs.passModel(_to_lp(instance, layout))
        if start is not None:
            warm = highspy.HighsSolution()
            warm.col_value = _start_vector(instance, layout, start).tolist()
            warm.value_valid = True
            highs.setSolution(warm)
        run_for(highs, time_limit_s or self.limits.time_limit_s)
        values = np.asarray(highs.getSolution().col_value, dtype=float)
        if values.size != layout.n_cols:  # no feasible point found within the time limit
            values = np.concatenate(
                [np.zeros(layout.n_x + layout.n_y), instance.need.astype(float)]
            )
        info = highs.getInfo()
        optimal = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        return Solution(
            layout=layout,
            x=np.rint(values[: layout.n_x]).astype(np.int64),
            unmet=np.rint(values[layout.n_x + layout.n_y :]).astype(np.int64),
            objective=float(info.objective_function_value),
            mip_gap=float(info.mip_gap) if np.isfinite(info.mip_gap) else None,
            seconds=time.perf_counter() - began,
            optimal=optimal,
            dual_bound=float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None,
        )


@dataclass(frozen=True)
class Relaxation:
    """The LP relaxation's optimum: fractional hours per x column, and the capacity rows' shadow
    prices (gCO2eq per GPU-hour of a datacenter-period, >= 0)."""

    layout: Layout
    x: np.ndarray
    unmet: np.ndarray
    capacity_price: np.ndarray  # (D, T)
    objective: float
    optimal: bool = True  # False: stopped at a time limit, the values mean nothing


def solve_relaxation(
    highs: highspy.Highs, instance: Instance, time_limit_s: float | None = None
) -> Relaxation:
    """Solve the LP relaxation (dual simplex) of ``instance`` on ``highs``, within
    ``time_limit_s`` (None: no limit)."""
    layout = Layout.of(instance)
    lp = _to_lp(instance, layout)
    lp.integrality_ = []
    highs.clearModel()
    highs.clearSolver()
    highs.passModel(lp)
    run_for(highs, time_limit_s)
    solution = highs.getSolution()
    values = np.asarray(solution.col_value, dtype=float)
    jobs, dcs, periods = instance.shape
    capacity_row = 2 * jobs + layout.n_y
    duals = np.asarray(solution.row_dual, dtype=float)[capacity_row : capacity_row + dcs * periods]
    return Relaxation(
        layout=layout,
        x=values[: layout.n_x],
        unmet=values[layout.n_x + layout.n_y :],
        capacity_price=np.maximum(-duals, 0.0).reshape(dcs, periods),
        objective=float(highs.getInfo().objective_function_value),
        optimal=highs.getModelStatus() == highspy.HighsModelStatus.kOptimal,
    )


def _to_lp(instance: Instance, layout: Layout) -> highspy.HighsLp:
    jobs, dcs, periods = instance.shape
    n_x, n_y = layout.n_x, layout.n_y
    x_cols = np.arange(n_x)
    y_cols = n_x + np.arange(n_y)
    u_cols = n_x + n_y + np.arange(jobs)
    need = instance.need.astype(float)
    length = instance.periods.length.astype(float)

    demand_row, site_row, link_row = 0, jobs, 2 * jobs
    capacity_row = link_row + n_y
    power_row = capacity_row + dcs * periods
    n_rows = power_row + (dcs * periods if instance.power_cap_kw is not None else 0)

    cell = layout.x_dc * periods + layout.x_period
    rows = [
        demand_row + layout.x_job,
        demand_row + np.arange(jobs),
        site_row + layout.y_job,
        link_row + layout.y_index_of_x(),
        link_row + np.arange(n_y),
        capacity_row + cell,
    ]
    cols = [x_cols, u_cols, y_cols, x_cols, y_cols, x_cols]
    vals = [
        np.ones(n_x),
        np.ones(jobs),
        np.ones(n_y),
        np.ones(n_x),
        -need[layout.y_job],
        instance.gpus[layout.x_job].astype(float),
    ]
    row_lower = [
        need,
        np.zeros(jobs),
        np.full(n_y, -np.inf),
        np.full(dcs * periods, -np.inf),
    ]
    row_upper = [
        need,
        np.ones(jobs),
        np.zeros(n_y),
        (np.maximum(instance.capacity, 0) * length[None, :]).ravel(),
    ]
    if instance.power_cap_kw is not None:
        rows.append(power_row + cell)
        cols.append(x_cols)
        vals.append(instance.power_kw[layout.x_job].astype(float))
        row_lower.append(np.full(dcs * periods, -np.inf))
        row_upper.append((instance.power_cap_kw[:, None] * length[None, :]).ravel())

    matrix = sparse.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_rows, layout.n_cols),
    )
    lp = highspy.HighsLp()
    lp.num_col_ = layout.n_cols
    lp.num_row_ = n_rows
    lp.col_cost_ = layout.costs(instance)
    lp.col_lower_ = np.zeros(layout.n_cols)
    lp.col_upper_ = np.concatenate([layout.x_upper.astype(float), np.ones(n_y), need])
    lp.row_lower_ = np.concatenate(row_lower)
    lp.row_upper_ = np.concatenate(row_upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr
    lp.a_matrix_.index_ = matrix.indices
    lp.a_matrix_.value_ = matrix.data
    kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
    lp.integrality_ = [kinds[int(integer)] for integer in layout.integer_columns(instance)]
    return lp


def _start_vector(instance: Instance, layout: Layout, start: np.ndarray) -> np.ndarray:
    """A feasible-as-possible column vector from an hour grid: one site per job, the rest unmet."""
    jobs, _, _ = instance.shape
    per_site = start.sum(axis=2)
    site = per_site.argmax(axis=1)
    keep = np.zeros_like(start)
    keep[np.arange(jobs), site, :] = start[np.arange(jobs), site, :]
    x = np.minimum(keep[layout.x_job, layout.x_dc, layout.x_period], layout.x_upper)
    placed = np.bincount(layout.x_job, weights=x, minlength=jobs)
    excess = np.maximum(placed - instance.need, 0)
    if excess.any():  # a job needs fewer hours than before: drop its latest hours
        for j in np.nonzero(excess)[0]:
            columns = np.nonzero((layout.x_job == j) & (x > 0))[0][::-1]
            for column in columns:
                cut = min(x[column], excess[j])
                x[column] -= cut
                excess[j] -= cut
                if not excess[j]:
                    break
        placed = np.bincount(layout.x_job, weights=x, minlength=jobs)
    y = ((site[layout.y_job] == layout.y_dc) & (placed[layout.y_job] > 0)).astype(float)
    unmet = instance.need - placed
    return np.concatenate([x.astype(float), y, unmet.astype(float)])
