"""A lower bound on the optimum that knows each job runs at one site: Lagrangian on capacity.

The LP relaxation lets a job split its hours across sites, so on large instances its bound sits
~8 % below every plan found and says nothing about whether those plans are good. Pricing the
capacity rows instead (λ ≥ 0 gCO2eq per GPU-hour of a datacenter-period) leaves one small
integer problem per job: pick one allowed site and its ``need`` cheapest priced hours there
(or leave hours unmet at the penalty). For every λ,

    L(λ) = Σ_j min_d [switch[j,d] + cheapest need hours of (cost + gpus_j·λ)] − Σ λ·capacity

(the switch paid only where the job places an hour: a job that runs nowhere pays its need at the
penalty and nothing else, as in the MILP and :func:`.model.total_cost`)

is a lower bound on the MILP optimum (weak duality), and at the LP relaxation's capacity duals
it is already at least the LP bound (each job's subproblem only gets harder than its
relaxation). Projected subgradient steps then raise it. Power caps are dropped, which can only
lower the bound. Every job is taken as integer (anticipated, fluid jobs are not modelled: the
scale benchmark has none). Pure numpy; used by the scale benchmark to tell integrality from lost emissions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .instance import Instance


@dataclass(frozen=True)
class LagrangianBound:
    value: float  # the best L(λ) found: no plan of the instance emits less
    prices: np.ndarray  # (D, T) the λ that gave it
    iterations: int


@dataclass(frozen=True)
class CheapestSchedules:
    """Every job's best answer to capacity prices λ: one allowed site and its ``need`` cheapest
    priced hours there (hours priced at or above the penalty left unmet). Shared by the
    Lagrangian bound (L(λ) sums ``cost``) and column generation (``domain/columns.py``: the
    schedule is the job's new column, ``cost`` its price before the convexity dual)."""

    cost: np.ndarray  # (J,) switch (if placed) + Σ (hour cost + gpus·λ)·hours + penalty·unmet hours
    site: np.ndarray  # (J,) the chosen datacenter, -1 where the job has no allowed one
    hours: np.ndarray  # (J, D, T) the schedule's hours, all at ``site``


def lagrangian_value(instance: Instance, prices: np.ndarray) -> tuple[float, np.ndarray]:
    """L(λ) and the GPU-hours the jobs' subproblems put on each datacenter-period (D, T)."""
    schedules = cheapest_schedules(instance, prices)
    room = instance.room()
    value = float(schedules.cost.sum() - (prices * room).sum())
    load = np.einsum("j,jdt->dt", instance.gpus.astype(float), schedules.hours)
    return value, load


def cheapest_schedules(instance: Instance, prices: np.ndarray) -> CheapestSchedules:
    """Solve every job's subproblem at ``prices`` (vectorised over jobs and sites)."""
    jobs, dcs, periods = instance.shape
    penalty = instance.unmet_penalty()
    grid = np.zeros((jobs, dcs, periods))
    if jobs == 0:
        return CheapestSchedules(np.zeros(0), np.zeros(0, dtype=np.int64), grid)
    priced = instance.hour_cost() + instance.gpus[:, None, None] * prices[None, :, :]
    priced = np.where(instance.usable > 0, np.minimum(priced, penalty[:, None, None]), np.inf)
    order = np.argsort(priced, axis=2, kind="stable")
    cost_sorted = np.take_along_axis(priced, order, axis=2)
    # an hour priced at the penalty is as good as unmet: it is left unmet (and off capacity)
    usable_sorted = np.take_along_axis(instance.usable, order, axis=2) * (
        cost_sorted < penalty[:, None, None]
    )
    need = instance.need.astype(float)[:, None, None]
    before = np.cumsum(usable_sorted, axis=2) - usable_sorted
    hours = np.clip(need - before, 0.0, usable_sorted)  # the cheapest hours first
    placed = hours.sum(axis=2)
    with np.errstate(invalid="ignore"):
        site_cost = np.where(hours > 0, hours * cost_sorted, 0.0).sum(axis=2)
    # hours a site cannot offer are unmet; the switch is paid where the job runs, so a site that
    # places nothing costs the whole need at the penalty (the job runs nowhere)
    site_cost += (instance.need[:, None] - placed) * penalty[:, None] + instance.switch_g * (
        placed > 0
    )
    has_site = instance.usable.sum(axis=2) > 0
    site_cost = np.where(has_site, site_cost, np.inf)
    best = np.argmin(site_cost, axis=1)
    placeable = has_site.any(axis=1)
    job_cost = np.where(
        placeable, site_cost[np.arange(jobs), np.where(placeable, best, 0)], instance.need * penalty
    )
    for j in np.nonzero(placeable)[0]:
        grid[j, best[j], order[j, best[j]]] = hours[j, best[j]]
    return CheapestSchedules(job_cost.astype(float), np.where(placeable, best, -1), grid)


def lagrangian_bound(
    instance: Instance,
    start_prices: np.ndarray,
    upper_bound: float,
    iterations: int = 60,
) -> LagrangianBound:
    """Projected subgradient ascent from ``start_prices`` (the LP duals are a good start), with
    Polyak steps towards ``upper_bound`` (the best plan known) and the step halved when the bound
    stalls."""
    room = instance.room()
    prices = np.maximum(np.asarray(start_prices, dtype=float), 0.0)
    best_value, best_prices = -np.inf, prices
    theta, stalled = 1.0, 0
    for iteration in range(1, iterations + 1):
        value, load = lagrangian_value(instance, prices)
        if value > best_value + 1e-9:
            best_value, best_prices, stalled = value, prices, 0
        else:
            stalled += 1
            if stalled >= 5:
                theta, stalled = theta / 2, 0
        gradient = load - room
        gradient[(prices <= 0) & (gradient < 0)] = 0.0  # projected: a zero price cannot fall
        norm = float((gradient**2).sum())
        if norm == 0.0 or theta < 1e-4 or upper_bound - value <= 1e-9:
            return LagrangianBound(best_value, best_prices, iteration)
        prices = np.maximum(prices + theta * (upper_bound - value) / norm * gradient, 0.0)
    return LagrangianBound(best_value, best_prices, iterations)
