"""Scale benchmark of the scheduler: re-plan latency and optimality gap at J x D x 168 h.

For each size, a backlog of J jobs (1-24 h, 1-8 GPUs, deadlines spread over the week) on D
datacenters whose intensities are real Electricity Maps traces (one grid zone each,
``DIR/em_hourly``; with more datacenters than zones, several share one, as real ones do),
capacity sized for ~30 % mean utilisation so the clean sites fill:

* baseline: the plain full model (hourly, every datacenter), built with PuLP and solved by
  HiGHS to a 0.1 % gap (time-limited; its dual bound is printed);
* the same full model built from numpy arrays into highspy (same gap);
* the scheduler as shipped (planner.py: the hourly MILP up to 40,000 hour columns, else 3 h /
  6 h blocks if those fit, else sites first), 2 s limit, 1 % gap; cold, then a re-plan an hour
  later with one new job, warm-started from the cold plan.

Gaps are of the shipped plan's hourly emissions against the best objective known for the
full hourly model (the lowest of all runs) and against the best lower bound: the LP relaxation,
HiGHS's dual bound on the full model, or the Lagrangian bound on capacity (domain/bounds.py),
which keeps one site per job and so separates integrality from emissions left on the table.

``--column-generation`` adds the exact one-site-per-job LP bound (Dantzig-Wolfe column
generation over per-job schedules, domain/columns.py; started at the Lagrangian prices, seeded
with the greedy plan and the re-plan) and a plan from it (price-and-branch: the generated
columns, plus greedy plans priced at the bound's capacity prices, chosen by a time-limited MIP),
both used in "best known" / "best bound".

    python bench/scheduler_scale_bench.py --data ../shared/data/carbon
    python bench/scheduler_scale_bench.py --data OTHER_DIR --start 2024-02-05 --sizes 50x4 --json

``--data`` is any folder laid out like ../shared/data/carbon; the D datacenters take the first D
zones of ``em_hourly/`` (sorted, or ``--zones``) whose traces cover the two weeks from ``--start``;
zones left out are listed with the reason. ``--json`` prints one object with every table figure,
the CPU seconds of the shipped plans beside their wall seconds, and the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import numpy as np
import pandas as pd
from benchkit import finite, print_json, progress, stdout_to_stderr
from rich.console import Console
from rich.table import Table

from metatune_scheduler.domain import (
    Aggregation,
    HighsModelSolver,
    Planner,
    SiteSnapshot,
    SolveLimits,
    pulp_builder,
)
from metatune_scheduler.domain.bounds import lagrangian_bound
from metatune_scheduler.domain.columns import generate_columns, price_and_branch
from metatune_scheduler.domain.decomposition import SiteTimingSolver, fits
from metatune_scheduler.domain.highs_builder import solve_relaxation
from metatune_scheduler.domain.model import objective_of
from metatune_scheduler.domain.planner import JobSnapshot, fill_greedily

HOURS = (
    2 * 168
)  # the week planned, and the week after it (the re-plan's horizon ends an hour later)


@dataclass(frozen=True)
class Traces:
    zones: list[str]
    ci: np.ndarray  # (zones, HOURS) direct intensity from the start, g/kWh
    skipped: list[str]  # zones left out, with the reason


def traces(data: Path, start: pd.Timestamp, zones: list[str] | None = None) -> Traces:
    """Every zone of ``data/em_hourly`` (or ``zones``, in that order) whose trace covers HOURS from ``start``."""
    folder = data / "em_hourly"
    names = zones or sorted(p.name.removesuffix(".csv.gz") for p in folder.glob("*.csv.gz"))
    kept, rows, skipped = [], [], []
    for zone in names:
        path = folder / f"{zone}.csv.gz"
        if not path.exists():
            skipped.append(f"{zone}: no em_hourly/{zone}.csv.gz in {data}")
            continue
        frame = pd.read_csv(
            path, usecols=["datetime_utc", "ci_direct_g_per_kwh"], parse_dates=["datetime_utc"]
        )
        series = frame.set_index("datetime_utc")["ci_direct_g_per_kwh"]
        window = series.loc[start : start + pd.Timedelta(hours=HOURS - 1)].dropna()
        if len(window) != HOURS:
            skipped.append(
                f"{zone}: {len(window)} of the {HOURS} h from {start:%Y-%m-%d %H:%M} in {path.name}"
            )
            continue
        kept.append(zone)
        rows.append(window.to_numpy(dtype=float))
    return Traces(kept, np.stack(rows) if rows else np.empty((0, HOURS)), skipped)


def datacenter_zones(found: Traces, n_dcs: int) -> tuple[list[str], np.ndarray]:
    """Each of ``n_dcs`` datacenters' grid zone and intensity: the zones in order, and past the
    last, around again (several datacenters in one zone, as real ones are, with one trace)."""
    rows = np.arange(n_dcs) % len(found.zones)
    return [found.zones[r] for r in rows], found.ci[rows]


def scenario(rng, n_jobs: int, ci: np.ndarray, first_hour: int):
    n_dcs = len(ci)
    need = rng.integers(1, 25, n_jobs)
    gpus = rng.integers(1, 9, n_jobs)
    deadline = need + rng.integers(0, 168 - need + 1)
    capacity = max(8, int(np.ceil((need * gpus).sum() / (n_dcs * 168 * 0.3))))
    names = [f"dc{d:02d}" for d in range(n_dcs)]
    jobs = [
        JobSnapshot(
            UUID(int=j + 1),
            int(need[j]),
            int(gpus[j]),
            float(gpus[j] * 0.5),
            first_hour + int(deadline[j]),
            frozenset(names),
            names[j % n_dcs],
        )
        for j in range(n_jobs)
    ]
    pue = rng.uniform(1.1, 1.4, n_dcs)
    return jobs, names, pue, capacity


def sites_at(names, pue, capacity, ci, offset: int) -> list[SiteSnapshot]:
    return [
        SiteSnapshot(name, float(pue[d]), capacity, ci[d, offset : offset + 168])
        for d, name in enumerate(names)
    ]


def main() -> None:
    args = parse_args()
    with stdout_to_stderr(args.json):
        report = run(args)
    if args.json:
        print_json(report)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="a folder laid out like ../shared/data/carbon (em_hourly/<zone>.csv.gz)",
    )
    parser.add_argument(
        "--start",
        default="2023-06-05",
        help="first hour of the planned week, UTC (the data must cover two weeks from it)",
    )
    parser.add_argument(
        "--zones",
        help="comma-separated zones to use, in order (default: every zone of em_hourly/, sorted)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object with every figure (tables go to stderr)",
    )
    parser.add_argument(
        "--sizes", default="50x4,200x8,1000x12", help="comma-separated JOBSxDATACENTERS"
    )
    parser.add_argument(
        "--baseline-limit-s", type=float, default=120.0, help="time limit of each full-model solve"
    )
    parser.add_argument(
        "--skip-pulp-above", type=int, default=10**9, help="skip the PuLP baseline above N jobs"
    )
    parser.add_argument(
        "--skip-full-above",
        type=int,
        default=10**9,
        help="skip the highspy full model above N jobs",
    )
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--lagrangian-iterations", type=int, default=200)
    parser.add_argument(
        "--column-generation", action="store_true", help="add the column-generation bound and plan"
    )
    parser.add_argument(
        "--cg-iterations", type=int, default=300, help="cap on column-generation iterations"
    )
    parser.add_argument(
        "--cg-limit-s", type=float, default=600.0, help="cap on column-generation seconds"
    )
    parser.add_argument(
        "--cg-mip-limit-s", type=float, default=120.0, help="time limit of the price-and-branch MIP"
    )
    args = parser.parse_args(argv)
    try:
        args.size_list = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes takes JOBSxDATACENTERS,..., got {args.sizes}")
    return args


# long: the bench's protocol in order, one block per column of its table
def run(args: argparse.Namespace) -> dict:
    console = Console(width=240, stderr=args.json)
    start = pd.Timestamp(args.start)
    start = start if start.tzinfo else start.tz_localize("UTC")
    first_hour = int(start.timestamp() // 3600)
    found = traces(
        args.data.resolve(), start, [z for z in (args.zones or "").split(",") if z] or None
    )
    for line in found.skipped:
        console.print(f"[yellow]skipped[/yellow] {line}")
    report = {
        "load_avg_1m": [round(os.getloadavg()[0], 2)],  # at the start; the end's appended
        "data": str(args.data),
        "start": f"{start:%Y-%m-%d %H:%M}",
        "seed": args.seed,
        "zones": found.zones,
        "skipped": found.skipped,
        "sizes": {},
    }
    table = Table(
        title="Re-plan latency and gap (J x D x 168 h): the re-plan instance, an hour after the cold plan"
    )
    for column in (
        "size",
        "binaries (hourly)",
        "PuLP build s",
        "PuLP solve s",
        "PuLP obj",
        "highspy full s",
        "highspy obj",
        "greedy obj",
        "LP bound (hourly)",
        "Lagrangian bound",
        "shipped cold s",
        "shipped re-plan s (CPU s)",
        "re-plan (its model)",
        "LP bound (its model)",
        "gap (its model)",
        "re-plan realised hourly",
        "gap vs best known",
        "gap vs best bound",
    ) + (("CG bound", "CG plan (price-and-branch)") if args.column_generation else ()):
        table.add_column(column, justify="right")
    for n_jobs, n_dcs in progress(args.size_list, "sizes"):
        size = f"{n_jobs}x{n_dcs}"
        if not found.zones:
            report["sizes"][size] = {"skipped": "no zone covers the period"}
            continue
        rng = np.random.default_rng(args.seed)
        zones, ci = datacenter_zones(found, n_dcs)
        jobs, names, pue, capacity = scenario(rng, n_jobs, ci, first_hour)
        # the objective, emissions alone: no delay premium, so every column prices the same model
        shipped = Planner(
            HighsModelSolver(SolveLimits(time_limit_s=2.0, mip_rel_gap=0.01)), delay_premium=0.0
        )
        began, cpu = time.perf_counter(), time.process_time()
        cold = shipped.plan(first_hour, jobs, sites_at(names, pue, capacity, ci, 0))
        cold_s, cold_cpu_s = time.perf_counter() - began, time.process_time() - cpu
        # an hour later: the first hour's work done, one new job, the cold plan as warm start
        later = [
            *_advance(jobs, cold, first_hour),
            JobSnapshot(UUID(int=10**6), 6, 4, 2.0, first_hour + 49, frozenset(names), names[0]),
        ]
        later = sorted(later, key=lambda job: str(job.job_id))
        sites = sites_at(names, pue, capacity, ci, 1)
        began, cpu = time.perf_counter(), time.process_time()
        replan = shipped.plan(first_hour + 1, later, sites, previous=cold)
        replan_s, replan_cpu_s = time.perf_counter() - began, time.process_time() - cpu

        full = Planner(aggregation=Aggregation.none(), delay_premium=0.0).instance(
            first_hour + 1, later, sites
        )
        grid = _grid(replan, later, names, first_hour + 1)
        over = np.einsum("j,jdt->dt", full.gpus, grid) - full.capacity
        console.print(
            f"{size}: the re-plan exceeds hourly capacity in {int((over[:, :24] > 0).sum())} datacenter-hours "
            f"of the first 24 h and {int((over[:, 24:] > 0).sum())} later (only possible inside 3 h / 6 h blocks, "
            f"where the model holds capacity per block); hours short {int((full.need - grid.sum(axis=(1, 2))).clip(0).sum())}"
        )
        # comparable with the hourly model: the plan's sites, re-timed hour by hour within capacity
        replan_hours = (
            grid if fits(full, grid) else SiteTimingSolver().retime(full, grid, fill_greedily)
        )
        replan_obj = _penalised(full, replan_hours)
        own = shipped.instance(first_hour + 1, later, sites)  # the model the re-plan solved
        block_bound = solve_relaxation(_quiet_highs(), own).objective
        greedy = fill_greedily(full, np.zeros(full.shape, dtype=np.int64))
        objectives = [replan_obj, _penalised(full, greedy)]
        relaxation = solve_relaxation(_quiet_highs(), full)
        lp_bound = bound = relaxation.objective
        pulp_cells = ["skipped"] * 3
        figures: dict = {
            "jobs": n_jobs,
            "datacenters": n_dcs,
            "zones": zones,
            "capacity_gpus": capacity,
            "binaries_hourly": int((full.usable > 0).sum()),
        }
        if n_jobs <= args.skip_pulp_above:
            began = time.perf_counter()
            pulp_builder.build(full)
            build_s = time.perf_counter() - began
            solved = pulp_builder.solve(full, gap=0.001, time_limit_s=args.baseline_limit_s)
            objectives.append(solved.objective)
            pulp_cells = [
                f"{build_s:.1f}",
                f"{solved.seconds - build_s:.1f}",
                _kg(solved.objective, full),
            ]
            figures["pulp"] = {
                "build_s": build_s,
                "solve_s": solved.seconds - build_s,
                "objective_kg": solved.objective / 1e3,
            }
        full_cells = ["skipped"] * 2
        if n_jobs <= args.skip_full_above:
            fast = HighsModelSolver(
                SolveLimits(time_limit_s=args.baseline_limit_s, mip_rel_gap=0.001, presolve=True)
            ).solve(full, greedy)
            objectives.append(fast.objective)
            if (
                not fast.unmet.any()
            ):  # HiGHS's proven bound; a gap of 0 is a bound equal to the objective
                if fast.dual_bound is not None:
                    bound = max(bound, min(fast.dual_bound, fast.objective))
                elif fast.mip_gap is not None:
                    bound = max(bound, fast.objective * (1 - fast.mip_gap))
            full_cells = [f"{fast.seconds:.1f}", _kg(fast.objective, full)]
            figures["highspy_full"] = {
                "seconds": fast.seconds,
                "objective_kg": fast.objective / 1e3,
                "mip_gap": finite(fast.mip_gap),
                "hit_time_limit": not fast.optimal,
            }
        best = min(value for value in objectives if value > 0)
        began = (
            time.perf_counter()
        )  # one site per job: a stronger bound than the LP's (domain/bounds.py)
        lagrangian = lagrangian_bound(
            full, relaxation.capacity_price, best, iterations=args.lagrangian_iterations
        )
        console.print(
            f"{size}: Lagrangian bound {lagrangian.value / 1e3:.1f} kg in {lagrangian.iterations} iterations, "
            f"{time.perf_counter() - began:.1f} s"
        )
        bound = max(bound, lagrangian.value)
        cg_cells = []
        if args.column_generation:
            cg_bound, cg_plan = _column_generation(
                console, size, full, [greedy, replan_hours], replan_hours, lagrangian.prices, args
            )
            bound = max(bound, cg_bound)
            objectives.append(cg_plan)
            best = min(best, cg_plan)
            cg_cells = [f"{cg_bound / 1e3:.1f} kg", _kg(cg_plan, full)]
            figures["cg_bound_kg"], figures["cg_plan_kg"] = cg_bound / 1e3, cg_plan / 1e3

        def unplaced(value, full=full):
            return value >= full.unmet_penalty().min(initial=np.inf)

        figures |= {
            "greedy_kg": objectives[1] / 1e3,
            "greedy_hours_unplaced": bool(unplaced(objectives[1])),
            "lp_bound_kg": lp_bound / 1e3,
            "lagrangian_bound_kg": lagrangian.value / 1e3,
            "shipped_cold_s": cold_s,
            "shipped_replan_s": replan_s,
            "shipped_cold_cpu_s": cold_cpu_s,
            "shipped_replan_cpu_s": replan_cpu_s,
            "load_avg_1m_at_replan": round(os.getloadavg()[0], 2),
            "replan_own_model_kg": replan.emissions_g / 1e3,
            "replan_own_lp_bound_kg": block_bound / 1e3,
            "replan_own_gap": (replan.emissions_g - block_bound) / block_bound,
            "replan_realised_hourly_kg": replan_obj / 1e3,
            "replan_hours_unplaced": bool(unplaced(replan_obj)),
            "best_known_kg": best / 1e3,
            "best_bound_kg": bound / 1e3,
            "gap_vs_best_known": (replan_obj - best) / best,
            "gap_vs_best_bound": (replan_obj - bound) / bound,
        }
        report["sizes"][size] = figures
        table.add_row(
            size,
            f"{int((full.usable > 0).sum()):,}",
            *pulp_cells,
            *full_cells,
            _kg(objectives[1], full),
            f"{lp_bound / 1e3:.1f} kg",
            f"{lagrangian.value / 1e3:.1f} kg",
            f"{cold_s:.2f}",
            f"{replan_s:.2f} ({replan_cpu_s:.2f})",
            f"{replan.emissions_g / 1e3:.1f} kg",
            f"{block_bound / 1e3:.1f} kg",
            f"{100 * (replan.emissions_g - block_bound) / block_bound:.2f} %",
            f"{replan_obj / 1e3:.1f} kg",
            f"{100 * (replan_obj - best) / best:.2f} %",
            f"{100 * (replan_obj - bound) / bound:.2f} %",
            *cg_cells,
        )
        console.print(table)
    report["load_avg_1m"].append(round(os.getloadavg()[0], 2))
    return report


def _column_generation(
    console, size, full, seeds, replan_hours, start_prices, args
) -> tuple[float, float]:
    """The column-generation bound and the price-and-branch plan's objective (penalised)."""
    generated = generate_columns(
        full, seeds, start_prices, max_iterations=args.cg_iterations, time_limit_s=args.cg_limit_s
    )
    last = generated.history[-1] if generated.history else None
    console.print(
        f"{size}: CG bound {generated.bound / 1e3:.1f} kg after {generated.iterations} iterations, "
        f"{generated.seconds:.1f} s, converged {generated.converged}, master LP {generated.master_value / 1e3:.1f} kg, "
        f"{generated.master.count:,} columns"
        + (f", last L {last.lagrangian / 1e3:.1f} kg" if last else "")
    )
    timing, cost = SiteTimingSolver(), full.hour_cost()
    priced = [
        timing.solve(
            full,
            fill_greedily(
                full,
                np.zeros(full.shape, dtype=np.int64),
                cost + scale * full.gpus[:, None, None] * generated.prices[None],
            ),
            fill_greedily,
        ).hours
        for scale in (0.5, 0.75, 1.0)
    ]
    console.print(
        f"{size}: greedy plans priced at 0.5 / 0.75 / 1.0 x the CG prices, re-timed: "
        + " / ".join(_kg(_penalised(full, plan), full) for plan in priced)
    )
    generated.add_plans(priced)
    plan = price_and_branch(generated, time_limit_s=args.cg_mip_limit_s)
    sites, replan_sites = (
        plan.hours.sum(axis=2).argmax(axis=1),
        replan_hours.sum(axis=2).argmax(axis=1),
    )
    console.print(
        f"{size}: price-and-branch {_kg(plan.objective, full)} in {plan.seconds:.1f} s (MIP over the columns: "
        f"bound {plan.mip_bound / 1e3:.1f} kg, optimal {plan.optimal}), within capacity {fits(full, plan.hours)}, "
        f"{int((sites != replan_sites).sum())} jobs at another site than the re-plan; jobs per site "
        f"{np.bincount(sites, minlength=full.shape[1]).tolist()} vs re-plan {np.bincount(replan_sites, minlength=full.shape[1]).tolist()}"
    )
    return generated.bound, plan.objective


def _grid(plan, jobs, names, first_hour: int) -> np.ndarray:
    """A plan's hours as a (J, D, 168) grid in ``jobs`` order."""
    grid = np.zeros((len(jobs), len(names), 168), dtype=np.int64)
    for j, job in enumerate(jobs):
        planned = plan.jobs.get(job.job_id)
        for hour, name, _ in planned.slots if planned else ():
            if 0 <= hour - first_hour < 168:
                grid[j, names.index(name), hour - first_hour] += 1
    return grid


def _penalised(instance, hours) -> float:
    unmet = np.maximum(instance.need - hours.sum(axis=(1, 2)), 0)
    return objective_of(instance, hours) + float(instance.unmet_penalty() @ unmet)


def _kg(objective: float, instance) -> str:
    return (
        "hours unplaced"
        if objective >= instance.unmet_penalty().min(initial=np.inf)
        else f"{objective / 1e3:.1f} kg"
    )


def _quiet_highs():
    import highspy

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    return highs


def _advance(jobs, plan, hour: int):
    for job in jobs:
        planned = plan.jobs.get(job.job_id)
        ran = planned is not None and planned.at(hour) is not None
        if ran and job.need_hours == 1:
            continue
        yield JobSnapshot(
            job.job_id,
            job.need_hours - int(ran),
            job.gpus,
            job.power_kw,
            job.deadline_hour,
            job.allowed,
            job.home,
            planned.at(hour) if ran else None,
        )


if __name__ == "__main__":
    main()
