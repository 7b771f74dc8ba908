"""Column generation over per-job schedules: the exact one-site-per-job LP bound, and a plan.

The Lagrangian bound (:mod:`.bounds`) and the Dantzig-Wolfe master below have the same optimum:
the LP in which every job picks a convex combination of *whole schedules* (one site, its hours
there, the rest unmet) under the capacity rows. Subgradient steps only approach it; column
generation reaches it and says when (no schedule has a negative reduced cost). No bound that
keeps one site per job and relaxes only the choice among schedules is stronger; what is left
between it and the best plan is that choice's integrality, or a plan that is not optimal.

Master LP (one ``highspy.Highs``, columns added as they are priced, re-solved from the last basis):

    min  Σ_k cost_k·w_k
    s.t. Σ_{k of job j} w_k = 1                          (μ_j: convexity, one row per job)
         Σ_k gpus_j·hours_k[d,t]·w_k ≤ capacity·length     (-λ[d,t] ≤ 0: capacity)
         w ≥ 0

A column k is one job at one site with a set of hours; ``cost_k`` = emissions + switch_g + the
penalty of its unmet hours. Every job also has the "all unmet" column, so the master is feasible
from the first solve; the columns of given plans (greedy, the shipped re-plan) seed it.

Pricing: the cheapest column of job j under λ is exactly the Lagrangian subproblem
(:func:`.bounds.cheapest_schedules`), and its reduced cost is ``its priced cost − μ_j``. So every
pricing round also yields L(λ) = Σ_j priced cost_j − Σ λ·room, a lower bound valid at *every*
iteration (the master's value is a bound only once no column prices out); the best is kept.

Price-and-branch (:func:`price_and_branch`): the restricted master with its columns made binary,
warm-started from the best seed plan; an offline yardstick of what the generated schedules can
pack, not the shipped planner. Power caps and fluid (anticipated) jobs are not modelled, as in
:mod:`.bounds` (the scale benchmark has neither).

Measured (``bench/scheduler_scale_bench.py --column-generation``, the re-plan instances, 2 busy
cores; the scheduler README's Scale table): 1000×12 converges in 23 iterations, 179 s, 16,016
columns, at 1793.6 kg (Lagrangian 1783.3, LP 1725.0); the best plan known there, 1850.9 kg, is a
greedy plan priced at 0.75 × these capacity prices, re-timed; the MIP over the columns did not
improve on it in 120 s (200×8: bound 462.7, plan 480.6 kg, the re-plan's). Tried and dropped (200×8, cold instance): diving (fix
each job's heaviest column, re-price the rest) ends with jobs whose columns only fit
fractionally, 519 kg against greedy's 490; the hourly MILP restricted to the sites the master
LP uses (35,541 binaries) did not improve its start in 120 s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np

from .bounds import CheapestSchedules, cheapest_schedules
from .highs_builder import run_for
from .instance import Instance
from .model import total_cost


@dataclass(frozen=True)
class Columns:
    """A batch of schedules, one per entry: the job, its site (-1: all unmet), the flat
    datacenter-period cells it runs in (d·T + t) with the hours there, and its true cost."""

    job: np.ndarray  # (K,)
    site: np.ndarray  # (K,)
    cells: list[np.ndarray]  # K arrays of cell indices
    hours: list[np.ndarray]  # K arrays of hours in those cells
    cost: np.ndarray  # (K,) emissions + switch + penalty·unmet hours


@dataclass(frozen=True)
class MasterSolution:
    value: float  # the restricted master LP's optimum (a bound only when no column prices out)
    job_duals: np.ndarray  # (J,) μ: the convexity rows' duals
    prices: np.ndarray  # (D, T) λ ≥ 0: minus the capacity rows' duals


@dataclass(frozen=True)
class Iteration:
    master_value: float
    lagrangian: float  # L(λ) at this iteration's duals: a valid lower bound
    entering: int  # columns added after this iteration's pricing
    seconds: float  # since the start of column generation


@dataclass
class ColumnGeneration:
    """What :func:`generate_columns` found; ``master`` keeps every column for price-and-branch."""

    master: RestrictedMaster
    bound: float  # the best L(λ) seen: no plan emits less
    prices: np.ndarray  # (D, T) the λ that gave it
    master_value: float  # the last master LP value (equal to ``bound`` at convergence)
    converged: bool  # no column with a negative reduced cost was left
    start_columns: np.ndarray  # (J,) the cheapest seed plan's column of each job (a MIP start)
    seconds: float
    history: list[Iteration] = field(default_factory=list)

    @property
    def iterations(self) -> int:
        return len(self.history)

    def add_plans(self, plans: Sequence[np.ndarray]) -> None:
        """Add the columns of more integer plans (e.g. greedy plans priced at ``prices``) for
        price-and-branch; the cheapest plan so far becomes its start. Why: columns priced for the
        LP optimum rarely combine into a whole plan other than the seed (measured at 200×8: the MIP
        over 5,188 generated columns found nothing better than greedy in 120 s); every whole plan
        added is one more set of columns that fit together."""
        instance = self.master.instance
        start_cost = self._start_cost()
        for plan in plans:
            columns = columns_of_plan(instance, plan)
            indices = self.master.add(columns)
            if columns.cost.sum() < start_cost:
                self.start_columns, start_cost = indices, float(columns.cost.sum())

    def _start_cost(self) -> float:
        cost = np.concatenate(self.master.cost)
        return float(cost[self.start_columns].sum())


@dataclass(frozen=True)
class ColumnPlan:
    """An integer plan made of generated columns (one per job)."""

    hours: np.ndarray  # (J, D, T)
    objective: float  # its emissions plus the penalty of unmet hours
    seconds: float
    mip_bound: float = (
        -np.inf
    )  # price-and-branch: HiGHS's dual bound on the restricted master MIP (not on the instance)
    optimal: bool = False  # price-and-branch: the restricted master MIP closed its gap


def columns_of_plan(instance: Instance, grid: np.ndarray) -> Columns:
    """One column per job from a (J, D, T) plan: its hours at its main site (hours elsewhere,
    beyond ``usable`` or beyond ``need`` dropped: a column is a one-site schedule)."""
    jobs = np.arange(instance.shape[0])
    site = grid.sum(axis=2).argmax(axis=1)
    at_site = np.minimum(grid[jobs, site], instance.usable[jobs, site]).astype(np.int64)
    at_site = _trim_to_need(at_site, instance.need)
    site = np.where(at_site.sum(axis=1) > 0, site, -1)
    return _columns(instance, jobs, site, at_site)


def columns_of_schedules(
    instance: Instance, schedules: CheapestSchedules, jobs: np.ndarray
) -> Columns:
    """The priced schedules of ``jobs`` as columns."""
    site = schedules.site[jobs]
    at_site = (
        np.rint(schedules.hours[jobs, np.maximum(site, 0)]).astype(np.int64) * (site >= 0)[:, None]
    )
    return _columns(instance, jobs, site, at_site)


def unmet_columns(instance: Instance) -> Columns:
    """Every job's "run nowhere" column: all hours at the penalty, no capacity used."""
    jobs = np.arange(instance.shape[0])
    return _columns(
        instance, jobs, np.full(len(jobs), -1), np.zeros((len(jobs), instance.shape[2]), np.int64)
    )


def _trim_to_need(hours: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Drop each row's latest hours beyond ``need``."""
    from_end = np.cumsum(hours[:, ::-1], axis=1)[:, ::-1]  # hours from t to the end
    after = from_end - hours
    excess = np.maximum(hours.sum(axis=1) - need, 0)[:, None]
    return np.asarray(hours - np.clip(excess - after, 0, hours))


def _columns(instance: Instance, jobs: np.ndarray, site: np.ndarray, hours: np.ndarray) -> Columns:
    """Columns from each job's site and (len(jobs), T) hours there, costed by the model's objective."""
    periods = instance.shape[2]
    placed = np.nonzero(site >= 0)[0]
    hour_cost = instance.hour_cost()
    emissions = np.zeros(len(jobs))
    emissions[placed] = (hour_cost[jobs[placed], site[placed]] * hours[placed]).sum(axis=1)
    emissions[placed] += instance.switch_g[jobs[placed], site[placed]]
    unmet = instance.need[jobs] - hours.sum(axis=1)
    cost = emissions + instance.unmet_penalty()[jobs] * unmet
    cells, amounts = [], []
    for row, d in enumerate(site):
        t = np.nonzero(hours[row])[0]
        cells.append(d * periods + t)
        amounts.append(hours[row, t])
    return Columns(jobs.astype(np.int64), site.astype(np.int64), cells, amounts, cost)


class RestrictedMaster:
    """The master LP on one ``highspy.Highs``: rows fixed at construction, columns appended by
    :meth:`add`, each :meth:`solve` restarts the simplex from the previous basis."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        jobs, dcs, periods = instance.shape
        self._highs = highspy.Highs()
        self._highs.setOptionValue("output_flag", False)
        self._highs.setOptionValue("random_seed", 0)
        self._highs.setOptionValue("presolve", "off")  # presolve would discard the warm basis
        room = np.maximum(instance.room(), 0.0).ravel()
        lower = np.concatenate([np.ones(jobs), np.full(dcs * periods, -np.inf)])
        upper = np.concatenate([np.ones(jobs), room])
        self._highs.addRows(
            len(lower), lower, upper, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0)
        )
        self.job: list[np.ndarray] = []
        self.site: list[np.ndarray] = []
        self.cells: list[np.ndarray] = []
        self.hours: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.count = 0

    def add(self, columns: Columns) -> np.ndarray:
        """Append ``columns``; returns their indices in the master."""
        if not len(columns.job):
            return np.zeros(0, dtype=np.int64)
        jobs = self.instance.shape[0]
        gpus = self.instance.gpus.astype(float)
        # each column: 1 in its job's convexity row, gpus × hours in the capacity rows of its cells
        rows = [
            np.concatenate([[j], jobs + cells])
            for j, cells in zip(columns.job, columns.cells, strict=True)
        ]
        entries = [
            np.concatenate([[1.0], gpus[j] * hours])
            for j, hours in zip(columns.job, columns.hours, strict=True)
        ]
        starts = np.concatenate([[0], np.cumsum([len(r) for r in rows])[:-1]]).astype(np.int32)
        k = len(columns.job)
        self._highs.addCols(
            k,
            columns.cost.astype(float),
            np.zeros(k),
            np.full(k, np.inf),
            int(sum(len(r) for r in rows)),
            starts,
            np.concatenate(rows).astype(np.int32),
            np.concatenate(entries),
        )
        self.job.append(columns.job)
        self.site.append(columns.site)
        self.cells.extend(columns.cells)
        self.hours.extend(columns.hours)
        self.cost.append(columns.cost)
        self.count += k
        return np.arange(self.count - k, self.count)

    def solve(self) -> MasterSolution:
        run_for(self._highs, None)
        solution = self._highs.getSolution()
        jobs, dcs, periods = self.instance.shape
        duals = np.asarray(solution.row_dual, dtype=float)
        return MasterSolution(
            value=float(self._highs.getInfo().objective_function_value),
            job_duals=duals[:jobs],
            prices=np.maximum(-duals[jobs:], 0.0).reshape(dcs, periods),
        )

    def job_of(self) -> np.ndarray:
        """(K,) the job of every column."""
        return np.concatenate(self.job)

    def choose_integer(
        self, start: np.ndarray, time_limit_s: float, heuristic_effort: float = 0.3
    ) -> tuple[np.ndarray, float, bool]:
        """Make every column binary and solve the MIP from ``start`` (one column per job); the
        master LP is gone afterwards. Returns each job's chosen column, HiGHS's dual bound, and
        whether it closed the gap. The all-unmet columns of jobs ``start`` places in full are
        dropped: their cost (need × penalty, ~1e8) next to emissions (~1e3) is what HiGHS warns
        about as bad scaling, and a plan that places everything cannot use them profitably.
        ``heuristic_effort`` is raised from HiGHS's 0.05: finding plans is the point here.
        Presolve stays off: with it, HiGHS 1.16 once reported the start "optimal" at an objective
        below the LP bound (447.6 vs 465.0 kg at 200×8) and returned it unimproved."""
        highs, every = self._highs, np.arange(self.count, dtype=np.int32)
        highs.setOptionValue("mip_rel_gap", 1e-4)
        highs.setOptionValue("mip_heuristic_effort", float(heuristic_effort))
        highs.changeColsIntegrality(
            self.count, every, np.full(self.count, highspy.HighsVarType.kInteger)
        )
        site, job = np.concatenate(self.site), self.job_of()
        start_hours = np.array([self.hours[k].sum() for k in start])
        placed_in_full = np.zeros(self.instance.shape[0], dtype=bool)
        placed_in_full[job[start]] = (site[start] >= 0) & (
            start_hours == self.instance.need[job[start]]
        )
        upper = np.where((site < 0) & placed_in_full[job], 0.0, 1.0)
        highs.changeColsBounds(self.count, every, np.zeros(self.count), upper)
        warm = highspy.HighsSolution()
        values = np.zeros(self.count)
        values[start] = 1.0
        warm.col_value = values.tolist()
        warm.value_valid = True
        highs.setSolution(warm)
        run_for(highs, time_limit_s)
        values = np.asarray(highs.getSolution().col_value, dtype=float)
        chosen = np.full(self.instance.shape[0], -1)
        if values.size == self.count:
            picked = np.nonzero(values > 0.5)[0]
            chosen[job[picked]] = picked
        optimal = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        return chosen, float(highs.getInfo().mip_dual_bound), optimal

    def grid(self, chosen: np.ndarray) -> np.ndarray:
        """(J, D, T) hours of one column per job (-1: none)."""
        jobs, dcs, periods = self.instance.shape
        flat = np.zeros((jobs, dcs * periods), dtype=np.int64)
        for j, k in enumerate(chosen):
            if k >= 0:
                flat[j, self.cells[k]] = self.hours[k]
        return flat.reshape(jobs, dcs, periods)


def generate_columns(
    instance: Instance,
    seeds: Sequence[np.ndarray] = (),
    start_prices: np.ndarray | None = None,
    max_iterations: int = 200,
    time_limit_s: float = 120.0,
    smoothing: float = 0.7,
    tolerance: float = 1e-6,
) -> ColumnGeneration:
    """Column generation from the columns of ``seeds`` (plans, (J, D, T)) and, if given, of the
    schedules priced at ``start_prices`` (the LP relaxation's capacity duals are a good start).

    Pricing is stabilised (Wentges smoothing): jobs are priced at ``smoothing``·λ_best +
    (1 − ``smoothing``)·λ_master, where λ_best gave the best L(λ) so far, because the master's own
    duals swing wildly while it has few columns (measured at 200×8: L at the raw duals falls to a
    fifth of the LP bound in the first iterations). A smoothed schedule enters only if its reduced
    cost at the master's duals is negative; when none does, the jobs are priced at the master's
    duals themselves, and only when none prices out there is the master optimal (``converged``).
    Stops then, or at the iteration or time cap (``bound`` is valid either way, only weaker)."""
    began = time.perf_counter()
    room = np.maximum(instance.room(), 0.0)
    master = RestrictedMaster(instance)
    master.add(unmet_columns(instance))
    seeded = [columns_of_plan(instance, seed) for seed in seeds]
    indices = [master.add(columns) for columns in seeded]
    start_columns = (
        indices[int(np.argmin([columns.cost.sum() for columns in seeded]))]
        if seeded
        else np.arange(instance.shape[0])
    )
    best = _Best(-np.inf, np.zeros(room.shape))
    if start_prices is not None:
        schedules = best.price(
            instance, np.maximum(np.asarray(start_prices, dtype=float), 0.0), room
        )
        master.add(columns_of_schedules(instance, schedules, np.nonzero(schedules.site >= 0)[0]))
    history: list[Iteration] = []
    converged, value = False, np.inf
    everyone = np.ones(instance.shape[0], dtype=bool)
    for _ in range(max_iterations):
        value, lagrangian, entering = _price_round(
            master, best, room, everyone, smoothing, tolerance
        )
        history.append(Iteration(value, lagrangian, entering, time.perf_counter() - began))
        if not entering:
            converged = True
            break
        if time.perf_counter() - began > time_limit_s:
            break
    return ColumnGeneration(
        master,
        best.value,
        best.prices,
        value,
        converged,
        start_columns,
        time.perf_counter() - began,
        history,
    )


def _price_round(
    master: RestrictedMaster,
    best: _Best,
    room: np.ndarray,
    open_jobs: np.ndarray,
    smoothing: float,
    tolerance: float,
) -> tuple[float, float, int]:
    """Solve the master, price the ``open_jobs`` (smoothed first, then at the master's duals) and
    add the schedules that price out: the master's value, the last L(λ), the columns added."""
    instance = master.instance
    solved = master.solve()
    lagrangian = -np.inf
    for weight in (smoothing, 0.0) if np.isfinite(best.value) and smoothing > 0 else (0.0,):
        prices = weight * best.prices + (1 - weight) * solved.prices
        schedules = best.price(instance, prices, room)
        lagrangian = max(lagrangian, best.last)
        jobs = _pricing_out(instance, schedules, solved, tolerance)
        jobs = jobs[open_jobs[jobs]]
        if len(jobs):
            master.add(columns_of_schedules(instance, schedules, jobs))
            return solved.value, lagrangian, len(jobs)
    return solved.value, lagrangian, 0


@dataclass
class _Best:
    """The best L(λ) seen and its λ (the stabilisation centre and the bound returned)."""

    value: float
    prices: np.ndarray
    last: float = -np.inf

    def price(self, instance: Instance, prices: np.ndarray, room: np.ndarray) -> CheapestSchedules:
        schedules = cheapest_schedules(instance, prices)
        self.last = float(schedules.cost.sum() - (prices * room).sum())
        if self.last > self.value:
            self.value, self.prices = self.last, prices
        return schedules


def _pricing_out(
    instance: Instance, schedules: CheapestSchedules, duals: MasterSolution, tolerance: float
) -> np.ndarray:
    """Jobs whose schedule (priced at any λ) has a negative reduced cost at the master's duals:
    its true cost + Σ gpus·hours·λ_master − μ_j, below ``-tolerance`` × its cost."""
    jobs = np.nonzero(schedules.site >= 0)[0]
    cost = columns_of_schedules(instance, schedules, jobs).cost
    capacity_charge = instance.gpus[jobs] * np.einsum(
        "jdt,dt->j", schedules.hours[jobs], duals.prices
    )
    reduced = cost + capacity_charge - duals.job_duals[jobs]
    return np.asarray(jobs[reduced < -tolerance * np.maximum(1.0, np.abs(cost))])


def price_and_branch(generation: ColumnGeneration, time_limit_s: float = 60.0) -> ColumnPlan:
    """The best integer choice among the generated columns (one per job), from the cheapest seed
    plan; consumes ``generation.master``."""
    began = time.perf_counter()
    master = generation.master
    chosen, mip_bound, optimal = master.choose_integer(generation.start_columns, time_limit_s)
    hours = master.grid(chosen)
    instance = master.instance
    return ColumnPlan(
        hours, total_cost(instance, hours), time.perf_counter() - began, mip_bound, optimal
    )
