"""Carbon benchmark of the scheduler on real hourly grid traces.

Compares, on a month of Poisson job arrivals over the registry's datacenters (one per grid
region found in ``DIR/em_hourly``), the emissions of
  P1  run now at home;  P2  greedy: start now at the cleanest allowed datacenter with room;
  S   this scheduler, re-planning every hour (the service re-plans on each clock tick) on the
      forecaster's forecasts (the committed model, as served: recalibrated at each issue on its
      last four weeks, weather degraded to forecast quality; ``--forecast naive``: the
      seasonal-naive 24 h forecast);
  S*  the same scheduler on exact intensities;
  O   the offline optimum with perfect information over the whole period (the same model:
      one datacenter per job, pauses free, HiGHS with a time limit; its gap is printed),
in three settings (ample capacity, tight capacity, data residency). Capture beyond greedy =
(P2 - S) / (P2 - O); O is HiGHS's best plan within its time limit, started from the better of
the greedy plan and S*'s (each job at one site, re-timed),
and the capture against HiGHS's lower bound on O (in brackets, with O's gap) is the conservative
figure. Realised emissions always use the actual intensities.

    python bench/scheduler_carbon_bench.py --data ../shared/data/carbon --days 30
    python bench/scheduler_carbon_bench.py --data OTHER_DIR --registry my_datacenters.toml --zones DE,FR --start 2024-01-08 --days 7 --json

``--data`` is any folder laid out like ../shared/data/carbon (``em_hourly/<zone>.csv.gz``, optionally
``em_weather/``); one datacenter per registry entry (``--registry``, default: the embedded one) whose
zone has data. Registry zones without data, or whose data do not cover the period, are left out and
listed (as are data zones no datacenter uses); ``--json`` prints one object with every figure of the
tables and those lists. The served forecasts are cached per region under ``--cache-dir``
(default .metatune/bench-cache), keyed by the region's data files, the model, the weather-error
model and the forecaster's code, so another folder or a code change never reuses stale forecasts.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid5

import benchkit
import highspy
import numpy as np
import pandas as pd
from benchkit import print_json, progress, stdout_to_stderr
from rich.console import Console
from rich.table import Table
from scipy import sparse

import metatune_forecaster
from metatune.contracts import CarbonPreference
from metatune.contracts.forecasts import expected_intensity
from metatune.errors import ConfigurationError
from metatune.registry import Registry, load_registry
from metatune_forecaster.adapters.carbon_folder import load_em
from metatune_forecaster.adapters.model_files import load_model, load_weather_error
from metatune_forecaster.adapters.package_data import MODEL_PATH, WEATHER_ERROR_PATH
from metatune_forecaster.domain.features import RegionArrays
from metatune_forecaster.domain.served import served_forecasts
from metatune_scheduler.domain import (
    Aggregation,
    HighsModelSolver,
    Instance,
    MigrationPolicy,
    Periods,
    Planner,
    SiteSnapshot,
    SolveLimits,
)
from metatune_scheduler.domain.anticipation import Request, anticipated_jobs
from metatune_scheduler.domain.decomposition import SiteTimingSolver
from metatune_scheduler.domain.instance import ANTICIPATED_QUANTILE, DELAY_PREMIUM
from metatune_scheduler.domain.model import Solution
from metatune_scheduler.domain.planner import JobSnapshot, fill_greedily
from metatune_scheduler.domain.preferences import HYSTERESIS_SHARE, NEAR_H

HISTORY_H = 8 * 24  # trace hours loaded before the start, for the seasonal-naive forecast
TAIL_H = 80  # hours simulated after the last arrival (slack + duration <= 72 h)


@dataclass(frozen=True)
class Jobs:
    arrival: np.ndarray
    hours: np.ndarray
    gpus: np.ndarray
    power_kw: np.ndarray
    deadline: np.ndarray
    home: np.ndarray  # datacenter index
    allowed: np.ndarray  # (J, D) bool


@dataclass(frozen=True)
class Fleet:
    """The datacenters the benchmark runs on, their traces, and what was left out and why."""

    names: list[str]
    regions: list[str]
    groups: np.ndarray
    pue: np.ndarray
    series: np.ndarray  # (D, HISTORY_H + hours) direct intensity, g/kWh
    skipped: list[str]  # one line per registry datacenter left out, with the reason
    unused_zones: list[str]  # zones with data that no chosen datacenter uses


def load(
    data: Path, start: pd.Timestamp, hours: int, registry: Registry, zones: list[str] | None = None
) -> Fleet:
    """One datacenter per registry entry (of ``zones`` if given) whose zone's trace covers
    ``HISTORY_H`` hours before ``start`` and ``hours`` from it; the others are listed, not fatal."""
    known = {dc.region for dc in registry.datacenters}
    if zones:
        unknown = sorted(set(zones) - known)
        if unknown:
            raise ConfigurationError(
                f"--zones {', '.join(unknown)}: not in the registry (its zones: {', '.join(sorted(known))})"
            )
    names, regions, groups, pue, series, skipped = [], [], [], [], [], []
    for dc in registry.datacenters:
        if zones and dc.region not in zones:
            continue
        path = data / "em_hourly" / f"{dc.region}.csv.gz"
        if not path.exists():
            skipped.append(f"{dc.name} ({dc.region}): no {path.relative_to(data)} in {data}")
            continue
        frame = pd.read_csv(
            path, usecols=["datetime_utc", "ci_direct_g_per_kwh"], parse_dates=["datetime_utc"]
        )
        frame = frame.set_index("datetime_utc")["ci_direct_g_per_kwh"]
        window = frame.loc[
            start - pd.Timedelta(hours=HISTORY_H) : start + pd.Timedelta(hours=hours - 1)
        ].dropna()
        if len(window) != HISTORY_H + hours:
            covered = (
                f"{frame.index.min():%Y-%m-%d %H:%M} to {frame.index.max():%Y-%m-%d %H:%M}"
                if len(frame)
                else "nothing"
            )
            skipped.append(
                f"{dc.name} ({dc.region}): {path.name} covers {covered}, {len(window)} of the "
                f"{HISTORY_H + hours} h needed ({HISTORY_H} h before {start:%Y-%m-%d %H:%M} + {hours} h)"
            )
            continue
        (
            names.append(dc.name),
            regions.append(dc.region),
            groups.append(dc.region_group),
            pue.append(dc.pue),
        )
        series.append(window.to_numpy(dtype=float))
    found = {p.name.removesuffix(".csv.gz") for p in (data / "em_hourly").glob("*.csv.gz")}
    unused = sorted(found - set(regions))
    return Fleet(
        names,
        regions,
        np.array(groups),
        np.array(pue, dtype=float),
        np.stack(series) if series else np.empty((0, HISTORY_H + hours)),
        skipped,
        unused,
    )


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode())
        h.update(path.read_bytes() if path.exists() else b"(absent)")
    return h.hexdigest()[:16]


def forecast_cache_key(
    data: Path, region: str, start: pd.Timestamp, hours: int, model_path: Path, seed: int
) -> str:
    """What the served forecasts depend on: the region's data files (content, not the folder's
    name), the model and weather-error files, the forecaster's source code, and the period."""
    data_files = [data / "em_hourly" / f"{region}.csv.gz", data / "em_weather" / f"{region}.csv.gz"]
    code = sorted(Path(metatune_forecaster.__file__).parent.rglob("*.py"))
    parts = (_digest(data_files), _digest([model_path, WEATHER_ERROR_PATH]), _digest(code))
    return (
        f"{region}-{start:%Y%m%d%H}-{hours}-{seed}-"
        + hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    )


def forecaster_intensity(
    data: Path,
    regions: list[str],
    start: pd.Timestamp,
    hours: int,
    model_path: Path,
    seed: int,
    cache: Path,
) -> np.ndarray:
    """(regions, 3, hours, 168) forecasts (p10, median, p90) issued at each hour from ``start``,
    as the forecaster serves them; NaN where a region's history is too short for an issue."""
    model = load_model(model_path)
    error_model = load_weather_error(WEATHER_ERROR_PATH)
    cache.mkdir(parents=True, exist_ok=True)
    out = []
    for region in regions:
        path = (
            cache / f"{forecast_cache_key(data, region, start, hours, model_path, seed)}-bands.npy"
        )
        if not path.exists():
            arrays = RegionArrays(load_em(data, region))
            issues = arrays.times.get_indexer(start + pd.to_timedelta(np.arange(hours), unit="h"))
            if (issues < 0).any():
                raise SystemExit(
                    f"{region}: the forecaster's data does not cover {start} + {hours} h"
                )
            served = served_forecasts(model, arrays, issues, error_model, seed)
            np.save(path, np.stack([served.matrix(issues, band=band) for band in range(3)]))
        out.append(np.load(path))
    return np.stack(out)


def make_jobs(
    rng, days: int, per_day: float, n_dcs: int, groups: np.ndarray, residency: bool
) -> Jobs:
    arrival = np.concatenate(
        [np.full(rng.poisson(per_day / 24), h) for h in range(days * 24)]
    ).astype(int)
    n = len(arrival)
    hours = rng.integers(1, 25, n)
    gpus = rng.integers(1, 9, n)
    home = rng.integers(0, n_dcs, n)
    allowed = groups[None, :] == groups[home][:, None] if residency else np.ones((n, n_dcs), bool)
    return Jobs(
        arrival, hours, gpus, gpus * 0.5, arrival + hours + rng.integers(0, 49, n), home, allowed
    )


def p1(jobs: Jobs, ci, pue) -> float:
    return sum(
        jobs.power_kw[j] * pue[jobs.home[j]] * ci[jobs.home[j], a : a + jobs.hours[j]].sum()
        for j, a in enumerate(jobs.arrival)
    )


def p2(jobs: Jobs, ci, pue, capacity) -> tuple[float, int, np.ndarray]:
    """Emissions, missed deadlines and the (job, datacenter, hour) grid of the greedy plan (its
    delay: :func:`greedy_delay`)."""
    used = np.zeros_like(ci)
    grid = np.zeros((len(jobs.arrival), *ci.shape), dtype=np.int64)
    total, missed = 0.0, 0
    for j in np.argsort(jobs.arrival, kind="stable"):
        h, need, g = jobs.arrival[j], jobs.hours[j], jobs.gpus[j]
        while True:
            room = [
                d
                for d in np.nonzero(jobs.allowed[j])[0]
                if (used[d, h : h + need] + g <= capacity).all()
            ]
            if room:
                d = min(room, key=lambda d: pue[d] * ci[d, h])
                used[d, h : h + need] += g
                grid[j, d, h : h + need] = 1
                total += jobs.power_kw[j] * pue[d] * ci[d, h : h + need].sum()
                missed += h + need > jobs.deadline[j]
                break
            h += 1
    return total, missed, grid


def greedy_delay(jobs: Jobs, grid: np.ndarray) -> float:
    """Mean hours the greedy plan finishes jobs past their earliest possible finish."""
    last = grid.sum(axis=1).cumsum(axis=1).argmax(axis=1) + 1
    return float((last - (jobs.arrival + jobs.hours)).mean()) if len(last) else 0.0


def machine() -> dict:
    """Where and when a run was measured, and how busy the machine was (1-min load average)."""
    return {**benchkit.machine(), "load_avg_1m": round(os.getloadavg()[0], 2)}


# long: one simulated month, hour by hour: the loop reads as the service's re-plan
def rolling(
    jobs: Jobs,
    ci,
    pue,
    capacity,
    names,
    forecast,
    refresh_h: int,
    migration: MigrationPolicy,
    limit_s: float,
    anticipate_h: int = 0,
    anticipated_quantile: float = ANTICIPATED_QUANTILE,
    anticipation_days: int = 1,
    known_arrivals: bool = False,
    mip_gap: float = 0.01,
    announce_h: int = 0,
    delay_premium: float = DELAY_PREMIUM,
    preference: CarbonPreference = CarbonPreference.greenest,
    hysteresis_share: float = HYSTERESIS_SHARE,
    near_h: int = NEAR_H,
):
    """Re-plan every hour (or at arrivals and every ``refresh_h``); ``known_arrivals``: a what-if in
    which the expected jobs of the next ``anticipate_h`` hours are the ones that really come (what no
    demand forecast can beat) instead of past days' requests; ``announce_h``:
    jobs are requested that many hours before they may start (``JobRequested.earliest_start``), so
    the scheduler plans them as real jobs from then on; every job has ``preference``. Besides
    emissions and missed deadlines it returns :class:`Stability` (delay and re-plan moves)."""
    planner = Planner(
        HighsModelSolver(SolveLimits(time_limit_s=limit_s, mip_rel_gap=mip_gap)),
        migration=migration,
        anticipated_quantile=anticipated_quantile,
        delay_premium=delay_premium,
        hysteresis_share=hysteresis_share,
        hysteresis_near_h=near_h,
    )
    n, end = len(jobs.arrival), ci.shape[1]
    remaining, location = jobs.hours.copy(), np.full(n, -1)
    finish = np.full(n, -1)
    ran = np.zeros((n, len(names), end), dtype=np.int64)  # the realised plan, hour by hour
    plan, total, solves, seconds = None, 0.0, 0, 0.0
    names_all = frozenset(names)

    def snapshot(j: int) -> JobSnapshot:
        return JobSnapshot(
            job_id=_uuid(j),
            need_hours=int(remaining[j]),
            gpus=int(jobs.gpus[j]),
            power_kw=float(jobs.power_kw[j]),
            deadline_hour=int(jobs.deadline[j]),
            home=names[jobs.home[j]],
            allowed=frozenset(np.array(names)[jobs.allowed[j]]) & names_all,
            location=names[location[j]] if location[j] >= 0 else None,
            not_before_hour=int(jobs.arrival[j]) if announce_h else None,
            preference=preference,
        )

    requests: list[Request] = []
    planned_start: dict[int, tuple[int, str]] = {}  # job -> (hour, dc) the last plan starts it
    moves = near_moves = 0
    for h in range(end - 168):
        requests.extend(Request(h, snapshot(j)) for j in np.nonzero(jobs.arrival == h)[0])
        active = np.nonzero((jobs.arrival - announce_h <= h) & (remaining > 0))[0]
        if not len(active):
            continue
        if plan is None or (jobs.arrival == h).any() or h % refresh_h == 0:
            if known_arrivals:
                coming = np.nonzero((jobs.arrival > h) & (jobs.arrival <= h + anticipate_h))[0]
                expected = [
                    dataclasses.replace(
                        snapshot(j),
                        job_id=uuid5(_uuid(j), "known-arrival"),
                        anticipated=True,
                        not_before_hour=int(jobs.arrival[j]),
                    )
                    for j in coming
                ]
            else:
                expected = anticipated_jobs(
                    requests, h, anticipate_h, anticipation_days, observed_since=0
                )
            snapshots = [snapshot(j) for j in active] + expected
            sites = [
                SiteSnapshot(names[d], float(pue[d]), int(capacity), forecast(d, h))
                for d in range(len(names))
            ]
            plan = planner.plan(h, snapshots, sites, previous=plan)
            solves += 1
            seconds += plan.solve_seconds
            for j in map(int, active):  # a job not started yet whose planned start changed: a move
                entry = plan.jobs.get(_uuid(j))
                if location[j] >= 0 or entry is None:
                    continue
                start = min((hour, dc) for hour, dc, _ in entry.slots)
                before = planned_start.get(j)
                if before is not None and before != start and before[0] >= h:
                    moves += 1
                    near_moves += before[0] < h + near_h
                planned_start[j] = start
        running = plan.running_at(h)
        for j in active:
            dc = running.get(_uuid(j))
            if dc is None:
                continue
            d = names.index(dc)
            if location[j] >= 0 and location[j] != d:
                moved_kwh = migration.transfer_kwh + migration.restart_hours * jobs.power_kw[j]
                total += moved_kwh * pue[d] * ci[d, h]
            total += jobs.power_kw[j] * pue[d] * ci[d, h]
            ran[j, d, h] = 1
            location[j] = d
            remaining[j] -= 1
            if remaining[j] == 0:
                finish[j] = h + 1
    missed = int(((finish < 0) | (finish > jobs.deadline)).sum())
    done = finish >= 0
    delay = finish[done] - (jobs.arrival[done] + jobs.hours[done])  # past the earliest finish
    stability = Stability(
        float(delay.mean()) if len(delay) else 0.0, moves / max(n, 1), near_moves / max(n, 1)
    )
    return total, missed, solves, seconds, ran, stability


@dataclass(frozen=True)
class Stability:
    """How long jobs waited and how often re-plans moved them: ``mean_delay_h``, finish minus the
    earliest possible finish (arrival + hours), over finished jobs; ``moves_per_job``, re-plans
    that changed the planned start (hour or datacenter) of a job not started yet, per job;
    ``near_moves_per_job``, those of a start that was within the hysteresis window."""

    mean_delay_h: float
    moves_per_job: float
    near_moves_per_job: float


@dataclass(frozen=True)
class Yardstick:
    """An offline optimum as far as HiGHS got: the best plan found (None: none in time), a proven
    lower bound (never NaN: the MIP's dual bound, else the LP relaxation's optimum) and whether
    the time limit stopped it before the requested gap."""

    objective: float | None
    bound: float | None
    hit_limit: bool
    unmet: int = 0

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None or self.objective <= 0:
            return None
        return max(0.0, 1 - self.bound / self.objective)


def offline(
    jobs: Jobs, ci, pue, capacity, time_limit_s: float, plans: list[np.ndarray]
) -> Yardstick:
    """The offline optimum (one datacenter per job, pauses free, no migration), warm-started from
    the best of ``plans`` (greedy, S*'s realised hours) with each job at the site where it ran
    most and re-timed with those sites fixed."""
    end = int(jobs.deadline.max())
    periods = Periods.build(0, Aggregation.none(end))
    hour = np.arange(end)
    window = (hour[None, :] >= jobs.arrival[:, None]) & (hour[None, :] < jobs.deadline[:, None])
    usable = (window[:, None, :] & jobs.allowed[:, :, None]).astype(np.int8)
    instance = Instance(
        periods=periods,
        need=jobs.hours,
        gpus=jobs.gpus,
        power_kw=jobs.power_kw,
        pue=pue,
        intensity=ci[:, :end],
        capacity=np.full((len(pue), end), float(capacity)),
        usable=usable,
        switch_g=np.zeros(usable.shape[:2]),
    )
    timing, starts = SiteTimingSolver(), []
    for plan in plans:
        site = plan.sum(axis=2).argmax(axis=1)  # one site per job: where it ran most
        grid = np.zeros(usable.shape, dtype=np.int64)
        grid[np.arange(len(site)), site] = plan.sum(axis=1)[:, :end]
        starts.append(timing.solve(instance, np.minimum(grid, usable), fill_greedily).hours)
    start = min(starts, key=lambda hours: Solution.of_hours(instance, hours, 0.0).objective)
    solution = HighsModelSolver(
        SolveLimits(time_limit_s=time_limit_s, mip_rel_gap=0.001, presolve=True)
    ).solve(instance, start)
    return offline_yardstick(solution, Solution.of_hours(instance, start, 0.0))


def offline_yardstick(solution: Solution, found: Solution) -> Yardstick:
    """The better of HiGHS's plan and the warm start, with HiGHS's bound (a gap of 0 is a bound
    equal to the objective; an unknown gap is an unknown bound, never 0 or 1)."""
    bound = solution.dual_bound
    if bound is None and solution.mip_gap is not None:
        bound = solution.objective * (1 - solution.mip_gap)
    better = (
        found
        if found.objective < solution.objective or solution.unmet.sum() > found.unmet.sum()
        else solution
    )
    if bound is not None:
        bound = min(bound, better.objective)
    return Yardstick(better.objective, bound, not solution.optimal, int(better.unmet.sum()))


def free_migration_optimum(jobs: Jobs, ci, pue, capacity, time_limit_s: float) -> Yardstick:
    """The offline optimum when a job may change datacenter every hour for free (no transfer
    time or energy, no site binaries): a lower bound on any plan S or S* can realise, and a far
    easier model than O's (on the tight week HiGHS ends 60 s within 2.6 % of it). When the time
    limit stops HiGHS the yardstick is the bound it reached (the MIP's dual bound, else the LP
    relaxation solved to the end) and the best integer plan if it found one."""
    end = int(jobs.deadline.max())
    job, dc, hour = [], [], []
    for j in range(len(jobs.arrival)):
        hours = np.arange(jobs.arrival[j], jobs.deadline[j])
        sites = np.nonzero(jobs.allowed[j])[0]
        job.append(np.full(len(sites) * len(hours), j))
        dc.append(np.repeat(sites, len(hours)))
        hour.append(np.tile(hours, len(sites)))
    job, dc, hour = (np.concatenate(v) for v in (job, dc, hour))
    n, cols = len(job), np.arange(len(job))
    slot = job * end + hour  # one row per (job, hour): at most one datacenter at a time
    slots, slot_row = np.unique(slot, return_inverse=True)
    rows = np.concatenate(
        [job, len(jobs.arrival) + slot_row, len(jobs.arrival) + len(slots) + dc * end + hour]
    )
    values = np.concatenate([np.ones(n), np.ones(n), jobs.gpus[job].astype(float)])
    n_rows = len(jobs.arrival) + len(slots) + len(pue) * end
    matrix = sparse.csc_matrix((values, (rows, np.tile(cols, 3))), shape=(n_rows, n))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, n_rows
    lp.col_cost_ = (jobs.power_kw[job] * pue[dc] * ci[dc, hour]).tolist()
    lp.col_lower_, lp.col_upper_ = [0.0] * n, [1.0] * n
    need = jobs.hours.astype(float)
    lp.row_lower_ = np.concatenate([need, np.full(n_rows - len(need), -highspy.kHighsInf)]).tolist()
    lp.row_upper_ = np.concatenate(
        [need, np.ones(len(slots)), np.full(len(pue) * end, float(capacity))]
    ).tolist()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = (
        matrix.indptr.tolist(),
        matrix.indices.tolist(),
        matrix.data.tolist(),
    )
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", float(time_limit_s))
    highs.setOptionValue("mip_rel_gap", 0.001)
    highs.passModel(lp)
    highs.run()
    hit_limit = highs.getModelStatus() != highspy.HighsModelStatus.kOptimal
    info = highs.getInfo()
    found = (
        info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    )  # an integer plan in time
    objective = (
        float(info.objective_function_value)
        if found and math.isfinite(info.objective_function_value)
        else None
    )
    if math.isfinite(info.mip_dual_bound) and info.mip_dual_bound > 0:
        bound = float(info.mip_dual_bound)
    else:  # no bound from the MIP yet: the LP relaxation's, solved to the end
        highs.setOptionValue("solve_relaxation", True)
        highs.setOptionValue("time_limit", highspy.kHighsInf)
        highs.run()
        if highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"the free-migration LP relaxation ended {highs.getModelStatus()}")
        bound = float(highs.getInfo().objective_function_value)
    return Yardstick(
        objective, min(bound, objective) if objective is not None else bound, hit_limit
    )


def _t(grams: float | None) -> str:
    return "-" if grams is None else f"{grams / 1e6:.4f}"


def _tonnes(grams: float | None) -> float | None:
    return None if grams is None else grams / 1e6


def _uuid(j: int):
    from uuid import UUID

    return UUID(int=int(j) + 1)


def main() -> None:
    args = parse_args()
    with stdout_to_stderr(args.json):
        report = run(args)
    if args.json:
        print_json(report)


# long: one add_argument per option
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
        "--registry",
        type=Path,
        help="datacenter registry TOML (default: the embedded one, metatune/data/datacenters.toml)",
    )
    parser.add_argument(
        "--zones",
        help="comma-separated zones: only the registry's datacenters in them (default: every one with data)",
    )
    parser.add_argument(
        "--start",
        default="2023-03-01",
        help="first arrival hour, UTC (the data must cover 8 days before it)",
    )
    parser.add_argument(
        "--days",
        type=int,
        default=30,
        help="days of arrivals (then 80 h to finish and a 168 h horizon)",
    )
    parser.add_argument("--jobs-per-day", type=float, default=20.0)
    parser.add_argument("--ample", type=int, default=64, help="GPUs per datacenter, ample setting")
    parser.add_argument("--tight", type=int, default=16, help="GPUs per datacenter, tight setting")
    parser.add_argument(
        "--refresh-h",
        type=int,
        default=1,
        help="S and S*: re-plan at least every N hours (the service: every clock hour)",
    )
    parser.add_argument(
        "--solve-limit-s", type=float, default=2.0, help="S and S*: HiGHS time limit per re-plan"
    )
    parser.add_argument(
        "--mip-gap",
        type=float,
        default=0.01,
        help="S and S*: HiGHS relative MIP gap per re-plan (the service: 1 %%)",
    )
    parser.add_argument("--offline-limit-s", type=float, default=90.0)
    parser.add_argument(
        "--free-migration-limit-s",
        type=float,
        default=0.0,
        help="also solve the offline optimum with free hourly migration (a lower bound on any plan that "
        "may migrate) within this many seconds, and print the capture against it; 0: skip",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--settings", default="ample,tight,residency")
    parser.add_argument(
        "--forecast",
        choices=("model", "naive"),
        default="model",
        help="what S plans on: the forecaster's served forecasts or seasonal-naive 24 h",
    )
    parser.add_argument(
        "--plan-on",
        choices=("expected", "median"),
        default="expected",
        help="S: plan on the forecasts' expected intensity (as the service does) or their median",
    )
    parser.add_argument(
        "--anticipate-h",
        type=int,
        default=0,
        help="S and S*: keep room for the jobs expected over the next N hours (METATUNE_SCHEDULER_ANTICIPATE_H); 0: none",
    )
    parser.add_argument(
        "--anticipation-days",
        type=int,
        default=1,
        help="expected demand of an hour: the requests at that hour on the N most recent days, each 1/N "
        "(METATUNE_SCHEDULER_ANTICIPATION_DAYS)",
    )
    parser.add_argument(
        "--known-arrivals",
        action="store_true",
        help="what-if: the expected jobs of the next --anticipate-h hours are the ones that really come",
    )
    parser.add_argument(
        "--announce-h",
        type=int,
        default=0,
        help="jobs are requested N hours before they may start (JobRequested.earliest_start)",
    )
    parser.add_argument(
        "--only", default="S,S*", help="which online runs: S, S* or both (O always runs)"
    )
    parser.add_argument(
        "--anticipated-quantile",
        type=float,
        default=ANTICIPATED_QUANTILE,
        help="an expected job's unplaced hour costs this quantile of its usable hours "
        "(METATUNE_SCHEDULER_ANTICIPATED_QUANTILE)",
    )
    parser.add_argument(
        "--delay-premium",
        type=float,
        default=DELAY_PREMIUM,
        help="S and S*: gCO2eq/kWh added per hour of delay (METATUNE_SCHEDULER_DELAY_PREMIUM); 0: none",
    )
    parser.add_argument(
        "--preference",
        choices=[p.value for p in CarbonPreference],
        default=CarbonPreference.greenest.value,
        help="S and S*: every job's carbon_preference (greenest: today's objective)",
    )
    parser.add_argument(
        "--hysteresis-share",
        type=float,
        default=HYSTERESIS_SHARE,
        help="S and S*: a near start moves only to save more than this share of the job's emissions "
        "(METATUNE_SCHEDULER_HYSTERESIS_SHARE); 0: none",
    )
    parser.add_argument(
        "--hysteresis-near-h",
        type=int,
        default=NEAR_H,
        help="S and S*: hours ahead a planned start counts as near (METATUNE_SCHEDULER_HYSTERESIS_NEAR_H)",
    )
    parser.add_argument(
        "--model", type=Path, default=MODEL_PATH, help="the forecaster's model (--forecast model)"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(".metatune/bench-cache"),
        help="where served forecasts are cached",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object with every figure (tables go to stderr)",
    )
    args = parser.parse_args(argv)
    runs = set(args.only.split(","))
    if not runs <= {"S", "S*"}:
        parser.error(f"--only takes S and/or S*, got {args.only}")
    try:
        args.registry_loaded = load_registry(args.registry)
    except ConfigurationError as exc:
        parser.error(str(exc))
    args.zone_list = [z for z in (args.zones or "").split(",") if z]
    unknown = sorted(set(args.zone_list) - {dc.region for dc in args.registry_loaded.datacenters})
    if unknown:
        parser.error(
            f"--zones {', '.join(unknown)}: not in the registry (its zones: {', '.join(args.registry_loaded.regions())})"
        )
    return args


# long: the five planners of the docstring in order, one block each
def run(args: argparse.Namespace) -> dict:
    console = Console(width=240, stderr=args.json)

    start = pd.Timestamp(args.start, tz="UTC")
    hours = args.days * 24 + TAIL_H + 168
    zones = args.zone_list
    fleet = load(args.data.resolve(), start, hours, args.registry_loaded, zones or None)
    for line in fleet.skipped:
        console.print(f"[yellow]skipped[/yellow] {line}")
    if fleet.unused_zones:
        console.print(
            f"zones with data but no datacenter in the registry{' or --zones' if zones else ''}: {', '.join(fleet.unused_zones)}"
        )
    if len(fleet.names) < 2:
        console.print(
            f"[red]need at least two datacenters with data for {start:%Y-%m-%d} + {args.days} days, "
            f"found {len(fleet.names)}[/red]"
        )
        sys.exit(2)
    names, regions, groups, pue, series = (
        fleet.names,
        fleet.regions,
        fleet.groups,
        fleet.pue,
        fleet.series,
    )
    ci = series[:, HISTORY_H:]  # hour 0 = start

    def exact(d: int, h: int) -> np.ndarray:
        return ci[d, h : h + 168]

    def seasonal_naive(d: int, h: int) -> np.ndarray:  # the same hour of the last observed day
        k = np.arange(168)
        return series[d, HISTORY_H + h + k - 24 * (k // 24 + 1)]

    runs = set(args.only.split(","))
    if args.forecast == "model" and "S" in runs:
        trained_until = load_model(args.model).metadata.get("train_until")
        if trained_until and start < pd.Timestamp(trained_until):
            console.print(
                f"[yellow]warning: the model was trained on hours before {trained_until}; S's forecasts from "
                f"{start:%Y-%m-%d} are partly in-sample[/yellow]"
            )
        bands = forecaster_intensity(
            args.data.resolve(), regions, start, hours - 168, args.model, args.seed, args.cache_dir
        )
        served = (
            expected_intensity(*bands.transpose(1, 0, 2, 3))
            if args.plan_on == "expected"
            else bands[:, 1]
        )
        missing = np.isnan(served).any(axis=2)
        if missing.any():
            console.print(
                f"seasonal-naive where the forecaster had too little history: {int(missing.sum())} issues"
            )

        def forecast(d: int, h: int) -> np.ndarray:
            return seasonal_naive(d, h) if missing[d, h] else np.maximum(served[d, h], 0.0)
    else:
        forecast = seasonal_naive

    console.print(
        f"{len(names)} datacenters on {', '.join(regions)}; {args.days} days from {args.start}, "
        f"{args.jobs_per_day:g} jobs/day; S plans on {'the forecaster' if args.forecast == 'model' else 'seasonal-naive 24 h'}"
    )
    table = Table(title="Emissions (t CO2eq) and capture beyond greedy")
    for column in (
        "setting",
        "jobs",
        "P1",
        "P2",
        "S",
        "S*",
        "O (gap)",
        "P2 save",
        "S save",
        "S* save",
        "O save",
        "S capture (vs bound)",
        "S* capture (vs bound)",
        "missed P2/S/S*",
        "solves, mean s",
    ):
        table.add_column(column, justify="right")
    free_table = Table(
        title="Capture beyond greedy against the offline optimum with free hourly migration"
    )
    for column in (
        "setting",
        "O free migration t",
        "its lower bound t",
        "S capture (vs bound)",
        "S* capture (vs bound)",
    ):
        free_table.add_column(column, justify="right")
    migration = MigrationPolicy()
    chosen = args.settings.split(",")
    report = {
        "measured": machine(),
        "preference": args.preference,
        "hysteresis_share": args.hysteresis_share,
        "hysteresis_near_h": args.hysteresis_near_h,
        "data": str(args.data),
        "registry": str(args.registry) if args.registry else "embedded",
        "start": f"{start:%Y-%m-%d %H:%M}",
        "days": args.days,
        "jobs_per_day": args.jobs_per_day,
        "seed": args.seed,
        "forecast": args.forecast,
        "datacenters": names,
        "zones": regions,
        "skipped": fleet.skipped,
        "unused_zones": fleet.unused_zones,
        "settings": {},
    }
    for setting, capacity, residency in progress(
        (
            ("ample", args.ample, False),
            ("tight", args.tight, False),
            ("residency", args.ample, True),
        ),
        "settings",
    ):
        if setting not in chosen:
            continue
        rng = np.random.default_rng(args.seed)
        jobs = make_jobs(rng, args.days, args.jobs_per_day, len(names), groups, residency)
        began = time.perf_counter()
        base = p1(jobs, ci, pue)
        greedy, greedy_missed, greedy_grid = p2(jobs, ci, pue, capacity)

        def online(intensity, jobs=jobs, capacity=capacity):
            return rolling(
                jobs,
                ci,
                pue,
                capacity,
                names,
                intensity,
                args.refresh_h,
                migration,
                args.solve_limit_s,
                args.anticipate_h,
                args.anticipated_quantile,
                args.anticipation_days,
                args.known_arrivals,
                args.mip_gap,
                args.announce_h,
                args.delay_premium,
                CarbonPreference(args.preference),
                args.hysteresis_share,
                args.hysteresis_near_h,
            )

        results, plans = {}, [greedy_grid]
        for run, intensity in (("S", forecast), ("S*", exact)):
            if run in runs:
                results[run] = online(intensity)
                if run == "S*":  # O starts from the better of greedy and S*'s realised plan
                    plans.append(results[run][4])
                console.print(f"  {setting} {run}: {time.perf_counter() - began:.0f} s")
        o = offline(jobs, ci, pue, capacity, args.offline_limit_s, plans)
        opt = o.objective

        def capture(value, reference=opt, greedy=greedy):
            return (
                (greedy - value) / (greedy - reference)
                if reference is not None and greedy > reference
                else None
            )

        def saving(value, base=base):
            return f"{100 * (1 - value / base):.1f} %"

        def percent(share):
            return "-" if share is None else f"{100 * share:.0f} %"

        value = {run: results[run][0] if run in results else None for run in ("S", "S*")}
        solves, seconds = next(((r[2], r[3]) for r in results.values()), (0, 0.0))
        gap_text = "no bound" if o.gap is None else f"{100 * o.gap:.2f} %"
        table.add_row(
            setting,
            str(len(jobs.arrival)),
            *(_t(v) for v in (base, greedy, value["S"], value["S*"])),
            f"{opt / 1e6:.4f} ({gap_text}{', time limit' if o.hit_limit else ''}{', unmet ' + str(o.unmet) if o.unmet else ''})",
            saving(greedy),
            *(saving(v) if v is not None else "-" for v in (value["S"], value["S*"])),
            saving(opt),
            *(
                f"{percent(capture(v))} ({percent(capture(v, o.bound))})" if v is not None else "-"
                for v in (value["S"], value["S*"])
            ),
            "/".join(
                [str(greedy_missed)]
                + [str(results[run][1]) if run in results else "-" for run in ("S", "S*")]
            ),
            f"{solves}, {seconds / max(solves, 1):.2f}",
        )
        figures = {
            "jobs": len(jobs.arrival),
            "capacity_gpus": capacity,
            "p1_t": base / 1e6,
            "p2_t": greedy / 1e6,
            "s_t": _tonnes(value["S"]),
            "s_star_t": _tonnes(value["S*"]),
            "o_t": opt / 1e6,
            "o_bound_t": _tonnes(o.bound),
            "o_gap": o.gap,
            "o_hit_time_limit": o.hit_limit,
            "o_unmet_hours": o.unmet,
            "p2_saving": 1 - greedy / base,
            "o_saving": 1 - opt / base,
            "s_saving": None if value["S"] is None else 1 - value["S"] / base,
            "s_star_saving": None if value["S*"] is None else 1 - value["S*"] / base,
            "s_capture": capture(value["S"]) if value["S"] is not None else None,
            "s_capture_vs_bound": capture(value["S"], o.bound) if value["S"] is not None else None,
            "s_star_capture": capture(value["S*"]) if value["S*"] is not None else None,
            "s_star_capture_vs_bound": capture(value["S*"], o.bound)
            if value["S*"] is not None
            else None,
            "missed": {"P2": greedy_missed, **{run: results[run][1] for run in results}},
            "solves": solves,
            "mean_solve_s": seconds / max(solves, 1),
            "preference": args.preference,
            "p2_mean_delay_h": greedy_delay(jobs, greedy_grid),
            **{
                f"{key}_{field}": getattr(results[run][5], field) if run in results else None
                for key, run in (("s", "S"), ("s_star", "S*"))
                for field in ("mean_delay_h", "moves_per_job", "near_moves_per_job")
            },
        }
        if args.free_migration_limit_s > 0:
            free = free_migration_optimum(jobs, ci, pue, capacity, args.free_migration_limit_s)
            reference = free.objective if free.objective is not None else free.bound
            free_table.add_row(
                setting,
                _t(free.objective),
                _t(free.bound) + (" (time limit)" if free.hit_limit else ""),
                *(
                    f"{percent(capture(v, reference))} ({percent(capture(v, free.bound))})"
                    if v is not None
                    else "-"
                    for v in (value["S"], value["S*"])
                ),
            )
            figures["free_migration"] = {
                "objective_t": _tonnes(free.objective),
                "bound_t": free.bound / 1e6,
                "hit_time_limit": free.hit_limit,
                **{
                    f"{key}_capture": capture(value[run], reference)
                    if value[run] is not None
                    else None
                    for key, run in (("s", "S"), ("s_star", "S*"))
                },
                **{
                    f"{key}_capture_vs_bound": capture(value[run], free.bound)
                    if value[run] is not None
                    else None
                    for key, run in (("s", "S"), ("s_star", "S*"))
                },
            }
        report["settings"][setting] = figures
        stable = {run: results[run][5] for run in results}
        console.print(
            f"{setting}, {args.preference}: "
            + "; ".join(
                f"{run} mean delay {s.mean_delay_h:.2f} h, moves/job {s.moves_per_job:.2f} "
                f"(near {s.near_moves_per_job:.2f})"
                for run, s in stable.items()
            )
            + f"; P2 mean delay {figures['p2_mean_delay_h']:.2f} h"
        )
        console.print(f"{setting}: {time.perf_counter() - began:.0f} s")
        console.print(table)
        if args.free_migration_limit_s > 0:
            console.print(free_table)
    report["measured"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    return report


if __name__ == "__main__":
    main()
