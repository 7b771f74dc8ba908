"""The model of :mod:`.model`, written readably with PuLP (the reference the fast builder is
tested against, and the plain PuLP -> HiGHS baseline of the scale benchmark). The service never
imports it: PuLP comes with the package's ``bench`` extra (``metatune-scheduler[bench]``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pulp

from .instance import Instance
from .model import Layout, Solution


def build(
    instance: Instance,
) -> tuple[
    pulp.LpProblem, dict[tuple[int, int, int], Any], dict[tuple[int, int], Any], dict[int, Any]
]:
    jobs, dcs, _ = instance.shape
    cost = instance.hour_cost()
    length = instance.periods.length
    usable = instance.usable
    cells = [(j, d, t) for j, d, t in zip(*np.nonzero(usable), strict=True)]
    pairs = sorted({(j, d) for j, d, _ in cells})

    problem = pulp.LpProblem("metatune_schedule", pulp.LpMinimize)
    integral = instance.integral()  # anticipated jobs are fluid (continuous)
    kind = {True: pulp.LpInteger, False: pulp.LpContinuous}
    x = {
        (j, d, t): problem.add_variable(
            f"x_{j}_{d}_{t}", 0, int(usable[j, d, t]), cat=kind[bool(integral[j])]
        )
        for j, d, t in cells
    }
    y = {
        (j, d): problem.add_variable(f"y_{j}_{d}", 0, 1, cat=kind[bool(integral[j])])
        for j, d in pairs
    }
    u = {j: problem.add_variable(f"u_{j}", 0, int(instance.need[j])) for j in range(jobs)}
    penalty = instance.unmet_penalty()

    problem += (
        pulp.lpSum(float(cost[key]) * var for key, var in x.items())
        + pulp.lpSum(float(instance.switch_g[key]) * var for key, var in y.items())
        + pulp.lpSum(float(penalty[j]) * var for j, var in u.items())
    )
    by_job: dict[int, list[Any]] = {j: [] for j in range(jobs)}
    by_pair: dict[tuple[int, int], list[Any]] = {pair: [] for pair in pairs}
    by_cell: dict[tuple[int, int], list[tuple[int, Any]]] = {}
    for (j, d, t), var in x.items():
        by_job[j].append(var)
        by_pair[j, d].append(var)
        by_cell.setdefault((d, t), []).append((j, var))
    for j in range(jobs):
        problem += pulp.lpSum(by_job[j]) + u[j] == int(instance.need[j]), f"demand_{j}"
        sites = [y[j, d] for d in range(dcs) if (j, d) in y]
        if sites:
            problem += pulp.lpSum(sites) <= 1, f"site_{j}"
    for (j, d), hours in by_pair.items():
        problem += pulp.lpSum(hours) <= int(instance.need[j]) * y[j, d], f"link_{j}_{d}"
    for (d, t), members in by_cell.items():
        gpu_hours = max(float(instance.capacity[d, t]), 0.0) * int(length[t])
        problem += (
            pulp.lpSum(float(instance.gpus[j]) * var for j, var in members) <= gpu_hours,
            f"capacity_{d}_{t}",
        )
        if instance.power_cap_kw is not None:
            limit = float(instance.power_cap_kw[d]) * int(length[t])
            problem += (
                pulp.lpSum(float(instance.power_kw[j]) * var for j, var in members) <= limit,
                f"power_{d}_{t}",
            )
    return problem, x, y, u


def solve(instance: Instance, gap: float = 0.001, time_limit_s: float = 60.0) -> Solution:
    began = time.perf_counter()
    problem, x, _, u = build(instance)
    problem.solve(pulp.HiGHS(msg=False, gapRel=gap, timeLimit=time_limit_s))
    layout = Layout.of(instance)
    values = np.array(
        [
            x[j, d, t].value() or 0.0
            for j, d, t in zip(layout.x_job, layout.x_dc, layout.x_period, strict=True)
        ]
    )
    unmet = np.array([u[j].value() or 0.0 for j in range(len(instance.need))])
    return Solution(
        layout=layout,
        x=np.rint(values).astype(np.int64),
        unmet=np.rint(unmet).astype(np.int64),
        objective=float(pulp.value(problem.objective) or 0.0),
        mip_gap=None,
        seconds=time.perf_counter() - began,
        optimal=pulp.LpStatus[problem.status] == "Optimal",
    )
