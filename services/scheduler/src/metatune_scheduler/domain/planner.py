"""From jobs, sites and forecasts at one hour to an hourly plan: pinning, migration cost,
the solve (whole MILP or sites first), infeasibility with an earliest feasible finish, and the plan in hours."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np

from metatune.contracts import CarbonPreference, InfeasibleSituation

from .decomposition import SiteTimingSolver, priced_restart
from .highs_builder import HighsModelSolver, SolveLimits
from .horizon import Aggregation, Periods
from .instance import ANTICIPATED_QUANTILE, DELAY_PREMIUM, Instance, Keep
from .model import Solution
from .preferences import HYSTERESIS_SHARE, NEAR_H, fastest_price, time_prices


@dataclass(frozen=True)
class MigrationPolicy:
    """What moving a checkpoint to another datacenter costs.

    ``delay_hours``: the job cannot run at the new site before the transfer is done;
    ``transfer_kwh``: network and storage energy of one transfer;
    ``restart_hours``: extra compute at the new site (reload base model and data, warm-up).
    """

    delay_hours: int = 1
    transfer_kwh: float = 0.5
    restart_hours: float = 0.1


@dataclass(frozen=True)
class SiteSnapshot:
    name: str
    pue: float
    gpus: int  # GPUs this scheduler may use
    intensity: np.ndarray  # hourly forecast from the plan's first hour, gCO2eq/kWh, >= horizon long
    power_cap_kw: float | None = None


@dataclass(frozen=True)
class JobSnapshot:
    job_id: UUID
    need_hours: int  # wall-clock hours still to run
    gpus: int
    power_kw: float
    deadline_hour: int  # epoch hour by which the job must have finished (exclusive end)
    allowed: frozenset[str]  # datacenters the job may use (data residency)
    home: str  # submitter's datacenter: the run-now baseline
    location: str | None = None  # where its process or checkpoint is
    pinned: bool = False  # runs at ``location`` in the first hour, already committed
    hold_hours: int = 0  # runs at ``location`` for this many hours from the first: its minimum run
    arriving_at: str | None = (
        None  # a new site an earlier plan already gave it this hour: no second delay
    )
    not_before_hour: int | None = None  # epoch hour before which it cannot run
    anticipated: bool = False  # expected, not requested: holds room in the plan, never published
    weight: float = 1.0  # share of an anticipated job expected (its GPUs and power count this much)
    # what its submitter trades for carbon (preferences.py)
    preference: CarbonPreference = CarbonPreference.greenest
    # (epoch hour, datacenter) its previous plan gave it: credited for staying (hysteresis)
    kept: tuple[tuple[int, str], ...] = ()
    # IT energy still to draw, kWh (the energy model: :meth:`.JobRecord.remaining_energy_kwh`);
    # None: ``power_kw`` for each hour it runs
    energy_kwh: float | None = None

    def kwh_per_hour(self, hours: int | None = None) -> float:
        """IT energy priced in each of the ``hours`` it is planned to run (default: the hours it
        needs): its energy spread over them, as the agent will meter it, or its power for each
        one where it has no energy estimate."""
        if self.energy_kwh is None:
            return self.power_kw
        return self.energy_kwh / max(self.need_hours if hours is None else hours, 1)


@dataclass(frozen=True)
class Infeasibility:
    job_id: UUID
    reason: str
    earliest_finish_hour: int | None  # epoch hour (exclusive end); None: not with these datacenters
    situation: InfeasibleSituation = InfeasibleSituation.late
    anywhere_finish_hour: int | None = None  # earliest finish at any datacenter (residency relaxed)


@dataclass(frozen=True)
class Held:
    """Hours jobs must run where they are from the plan's first hour (committed, or their minimum
    run): job j at site ``site[j]`` (-1: none) for its first ``hours[j]`` hours."""

    site: np.ndarray
    hours: np.ndarray


def held_hours(job: JobSnapshot) -> int:
    return max(1 if job.pinned else 0, job.hold_hours)


@dataclass(frozen=True)
class PlannedJob:
    """Where a job runs, hour by hour: ``slots`` are (epoch hour, datacenter, gCO2eq), sorted
    by hour. Usually one datacenter; a pinned job that moves after its committed hour has two."""

    job_id: UUID
    slots: tuple[tuple[int, str, float], ...]

    @property
    def emissions_g(self) -> float:
        return sum(grams for _, _, grams in self.slots)

    def at(self, hour: int) -> str | None:
        return next((dc for h, dc, _ in self.slots if h == hour), None)


@dataclass(frozen=True)
class PlanResult:
    first_hour: int
    jobs: dict[UUID, PlannedJob]
    baseline_g: float
    infeasible: list[Infeasibility] = field(default_factory=list)
    solve_seconds: float = 0.0
    mip_gap: float | None = None

    @property
    def emissions_g(self) -> float:
        return sum(job.emissions_g for job in self.jobs.values())

    def running_at(self, hour: int) -> dict[UUID, str]:
        return {job.job_id: dc for job in self.jobs.values() if (dc := job.at(hour)) is not None}


class Planner:
    """Turns snapshots into an :class:`Instance`, solves it, and reads the plan back in hours."""

    def __init__(
        self,
        solver: HighsModelSolver | None = None,
        aggregation: Aggregation = Aggregation(),
        migration: MigrationPolicy = MigrationPolicy(),
        relax_rounds: int = 4,
        exact_columns: int = 40_000,
        hourly_columns: int = 40_000,
        feasibility_limit_s: float = 10.0,
        anticipated_quantile: float = ANTICIPATED_QUANTILE,
        delay_premium: float = DELAY_PREMIUM,
        timing_limit_s: float | None = 5.0,
        hysteresis_share: float = HYSTERESIS_SHARE,
        hysteresis_near_h: int = NEAR_H,
    ) -> None:
        """``hourly_columns``: up to this many hour columns the MILP keeps hourly periods, above
        it ``aggregation``'s blocks; ``exact_columns``: above this many columns (after
        aggregation) the model is solved sites-first (:mod:`.decomposition`) instead of as one
        MILP; ``feasibility_limit_s``: how long to look for a plan that places every hour before
        any deadline is declared unreachable; ``delay_premium``: gCO2eq/kWh added to the forecast
        for each hour from now, so that of two nearly equally clean hours the plan takes the
        earlier (see :meth:`_priced`); ``timing_limit_s``: the sites-fixed timing LP's time limit
        (:class:`.decomposition.SiteTimingSolver`; None: none); ``hysteresis_share``: a job whose
        previous plan has it run within ``hysteresis_near_h`` hours keeps that plan unless moving
        it saves more than this share of its emissions (:mod:`.preferences`; 0: no hysteresis)."""
        self.solver = solver or HighsModelSolver()
        self.timing = SiteTimingSolver(timing_limit_s)
        self.aggregation = aggregation
        self.migration = migration
        self.relax_rounds = relax_rounds
        self.exact_columns = exact_columns
        self.hourly_columns = hourly_columns
        self.anticipated_quantile = anticipated_quantile
        if delay_premium < 0:
            raise ValueError(f"delay_premium must be >= 0, got {delay_premium}")
        self.delay_premium = delay_premium
        if not 0 <= hysteresis_share < 1:
            raise ValueError(f"hysteresis_share must be in [0, 1), got {hysteresis_share}")
        self.hysteresis_share = hysteresis_share
        self.hysteresis_near_h = hysteresis_near_h
        self.feasibility = HighsModelSolver(
            SolveLimits(time_limit_s=feasibility_limit_s, mip_rel_gap=0.0)
        )

    def plan(
        self,
        first_hour: int,
        jobs: Sequence[JobSnapshot],
        sites: Sequence[SiteSnapshot],
        previous: PlanResult | None = None,
    ) -> PlanResult:
        began = time.perf_counter()
        jobs = sorted(
            (self._near(_arrival(job, previous, first_hour), previous, first_hour) for job in jobs),
            key=lambda job: str(job.job_id),
        )
        impossible = {
            job.job_id: reason for job in jobs if (reason := _impossible(job, sites)) is not None
        }
        infeasible = [
            impossible[job.job_id]
            for job in jobs
            if job.job_id in impossible and not job.anticipated
        ]
        plannable = [job for job in jobs if job.job_id not in impossible]
        if not any(not job.anticipated for job in plannable):
            return PlanResult(first_hour, {}, 0.0, infeasible)
        hourly = np.stack([site.intensity[: self.aggregation.horizon] for site in sites])
        periods, instance, pinned = self._choose(first_hour, plannable, sites, hourly)
        requested = instance.integral()  # the requested jobs: all but the anticipated
        solution = self._solve(instance, self._start(instance, periods, plannable, sites, previous))
        if solution.unmet[requested].any() and self._exact(
            instance
        ):  # a time-limit stop is not infeasibility:
            solution = self._place_everything(
                instance, solution, requested
            )  # look for room first (a MILP: not at scale)
        offered: dict[UUID, Infeasibility] = {}
        # offer the earliest finish the plan leaves room for; at scale once (each round re-solves every job)
        for _ in range(self.relax_rounds if self._exact(instance) else 1):
            late = [plannable[j] for j in np.nonzero(solution.unmet * requested)[0]]
            if not late:
                break
            residual = _residual(instance, periods, solution, sites, pinned, plannable)
            relaxed = {}
            for job in late:
                offered[job.job_id], finish = self._offer(
                    job, sites, residual, first_hour, offered.get(job.job_id)
                )
                relaxed[job.job_id] = dataclasses.replace(job, deadline_hour=finish)
            plannable = [relaxed.get(job.job_id, job) for job in plannable]
            instance, pinned = self._instance(first_hour, periods, plannable, sites, hourly)
            solution = self._solve(
                instance,
                fill_greedily(
                    instance, np.minimum(solution.hours(instance.shape), instance.usable)
                ),
            )
        if (solution.unmet * requested).any() and not instance.integral().all():
            # Expected jobs never cost a requested job its place: the offered finishes were
            # measured on room the expected jobs may still hold, so plan without them.
            return self.plan(
                first_hour, [job for job in jobs if not job.anticipated], sites, previous
            )
        infeasible.extend(offered.values())

        planned = _read_plan(
            first_hour, periods, instance, solution, plannable, sites, hourly, pinned
        )
        baseline = sum(
            run_now_at_home(job, sites, hourly) for job in plannable if not job.anticipated
        )
        return PlanResult(
            first_hour, planned, baseline, infeasible, time.perf_counter() - began, solution.mip_gap
        )

    def _offer(
        self,
        job: JobSnapshot,
        sites: Sequence[SiteSnapshot],
        residual: np.ndarray,
        first_hour: int,
        earlier: Infeasibility | None,
    ) -> tuple[Infeasibility, int]:
        """What ``job`` is offered, and its finish hour: the earliest the plan leaves it room for
        (after its deadline), and where it would finish with every site allowed; the reason of
        an ``earlier`` offer is kept."""
        estimate = _earliest_finish(job, sites, residual, first_hour, self.migration)
        finish = max(estimate, job.deadline_hour + 1)
        everywhere = frozenset(site.name for site in sites)
        anywhere = (
            None
            if everywhere <= job.allowed
            else _earliest_finish(
                dataclasses.replace(job, allowed=everywhere),
                sites,
                residual,
                first_hour,
                self.migration,
            )
        )
        reason = (earlier.reason if earlier is not None else None) or _late_reason(job, finish)
        return Infeasibility(job.job_id, reason, finish, anywhere_finish_hour=anywhere), finish

    def _choose(
        self,
        first_hour: int,
        jobs: Sequence[JobSnapshot],
        sites: Sequence[SiteSnapshot],
        hourly: np.ndarray,
    ) -> tuple[Periods, Instance, Held]:
        """Hourly periods when the MILP has at most ``hourly_columns``; else the aggregated
        blocks if those fit the whole MILP; else hourly again, for the sites-first path. Blocks only keep
        capacity per block, which costs emissions once capacity binds (measured on the tight
        carbon benchmark: 0.035 t with blocks vs 0.028 t hourly, same 2 s limit)."""
        periods = Periods.build(first_hour, Aggregation.none(self.aggregation.horizon))
        instance, pinned = self._instance(first_hour, periods, jobs, sites, hourly)
        if self._columns(instance) > self.hourly_columns and not self.aggregation.is_hourly:
            blocks = Periods.build(first_hour, self.aggregation)
            # the blocks' columns counted from the hourly ones before the blocks' instance is built
            coarse_usable = np.add.reduceat(instance.usable, blocks.offset, axis=2)
            if int((coarse_usable > 0).sum()) <= self.exact_columns or any(
                site.power_cap_kw for site in sites
            ):
                coarse, coarse_pinned = self._instance(first_hour, blocks, jobs, sites, hourly)
                return blocks, coarse, coarse_pinned
        return periods, instance, pinned

    @staticmethod
    def _columns(instance: Instance) -> int:
        return int((instance.usable > 0).sum())

    def _exact(self, instance: Instance) -> bool:
        return self._columns(instance) <= self.exact_columns or instance.power_cap_kw is not None

    def _solve(self, instance: Instance, start: np.ndarray) -> Solution:
        """The whole MILP when it is small enough (or has power caps), otherwise sites first.

        The MILP starts from the warm start re-timed with its sites fixed (the timing LP, a
        fraction of the time limit), and its answer is kept only if it beats that start: under a
        time limit on a loaded machine HiGHS may stop at an incumbent worse than the one it was
        given (measured: tight-capacity re-plans worse than the greedy plan)."""
        timed = self.timing.solve(instance, start, fill_greedily)
        if not self._exact(instance):
            timed = priced_restart(instance, timed, fill_greedily)
            return Solution.of_hours(instance, timed.hours, timed.seconds)
        polished = Solution.of_hours(instance, timed.hours, timed.seconds)
        solved = self.solver.solve(instance, timed.hours)
        if (
            solved.objective <= polished.objective + 1e-6
            and solved.unmet.sum() <= polished.unmet.sum()
        ):
            return solved
        return dataclasses.replace(polished, seconds=timed.seconds + solved.seconds)

    def _place_everything(
        self, instance: Instance, solution: Solution, requested: np.ndarray
    ) -> Solution:
        """Search for a plan that leaves no requested hour unplaced, ignoring emissions (a pure
        feasibility MILP, longer time limit; anticipated jobs cost nothing to drop there); if
        one exists, optimise emissions from it. Only hours this cannot place make a deadline
        unreachable."""
        placed = self.feasibility.solve(instance.carbon_blind(), solution.hours(instance.shape))
        if placed.unmet[requested].sum() >= solution.unmet[requested].sum():
            return solution
        better = self._solve(instance, placed.hours(instance.shape))
        return (
            better
            if better.unmet[requested].sum() <= placed.unmet[requested].sum()
            else Solution.of_hours(instance, placed.hours(instance.shape), better.seconds)
        )

    def _near(self, job: JobSnapshot, previous: PlanResult | None, first_hour: int) -> JobSnapshot:
        """``job`` with the hours its previous plan gave it as ``kept`` when that plan runs it
        within ``hysteresis_near_h`` hours (not a held job: its hours are fixed anyway)."""
        if (
            not self.hysteresis_share
            or previous is None
            or job.anticipated
            or held_hours(job)
            or (planned := previous.jobs.get(job.job_id)) is None
        ):
            return job
        slots = tuple((hour, dc) for hour, dc, _ in planned.slots if hour >= first_hour)
        if not slots or slots[0][0] >= first_hour + self.hysteresis_near_h:
            return job
        return dataclasses.replace(job, kept=slots)

    def _keep(
        self,
        periods: Periods,
        jobs: Sequence[JobSnapshot],
        sites: Sequence[SiteSnapshot],
        hourly: np.ndarray,
        usable: np.ndarray,
    ) -> Keep | None:
        """The hysteresis credit: each hourly period the previous plan gave a near job, where it
        may still run, credited ``hysteresis_share`` x the job's mean hourly emissions there."""
        index = {site.name: d for d, site in enumerate(sites)}
        period_of = periods.period_of_offset()
        cells: list[tuple[int, int, int, float]] = []
        for j, job in enumerate(jobs):
            slots = [
                (hour - periods.first_hour, index[dc])
                for hour, dc in job.kept
                if dc in index and 0 <= hour - periods.first_hour < periods.horizon
            ]
            if not slots:
                continue
            grams = np.mean([job.power_kw * sites[d].pue * hourly[d, h] for h, d in slots])
            for h, d in slots:
                t = int(period_of[h])
                if periods.length[t] == 1 and usable[j, d, t] > 0:
                    cells.append((j, d, t, self.hysteresis_share * float(grams)))
        if not cells:
            return None
        job_, dc, period, credit = (np.array(column) for column in zip(*cells, strict=True))
        return Keep(job_.astype(np.int64), dc.astype(np.int64), period.astype(np.int64), credit)

    def instance(
        self, first_hour: int, jobs: Sequence[JobSnapshot], sites: Sequence[SiteSnapshot]
    ) -> Instance:
        """The instance :meth:`plan` would solve first (for benchmarks and inspection)."""
        jobs = sorted(jobs, key=lambda job: str(job.job_id))
        hourly = np.stack([site.intensity[: self.aggregation.horizon] for site in sites])
        return self._choose(first_hour, jobs, sites, hourly)[1]

    def _priced(self, periods: Periods, hourly: np.ndarray) -> np.ndarray:
        """(D, T) intensity the plan minimises: each period's forecast plus ``delay_premium`` per
        hour from now. An hour of capacity left idle now is lost, while room later may be wanted
        by jobs not requested yet and a later hour's forecast is less sure, so deferring work
        should pay more than a near-tie. On a very clean, flat grid (hydro) the forecast alone
        spreads work over its slightly cleaner later hours, and the jobs requested meanwhile
        find that room taken (10 ample days, S*: capture beyond greedy 93 % -> 99 % at the
        default 0.03 g/kWh per hour; see the README). Reported emissions use the forecast alone."""
        return periods.mean(hourly) + self.delay_premium * periods.middle()[None, :]

    def _instance(
        self,
        first_hour: int,
        periods: Periods,
        jobs: Sequence[JobSnapshot],
        sites: Sequence[SiteSnapshot],
        hourly: np.ndarray,
    ) -> tuple[Instance, Held]:
        n_jobs, n_sites, horizon = len(jobs), len(sites), periods.horizon
        index = {site.name: d for d, site in enumerate(sites)}
        pue = np.array([site.pue for site in sites], dtype=float)
        capacity_hourly = np.tile(
            np.array([site.gpus for site in sites], dtype=float)[:, None], (1, horizon)
        )
        gpus = np.array([job.gpus * job.weight for job in jobs], dtype=float)
        power = np.array([job.power_kw * job.weight for job in jobs], dtype=float)
        need = np.array([job.need_hours for job in jobs], dtype=np.int64)
        pinned = np.full(n_jobs, -1)
        hold = np.zeros(n_jobs, dtype=np.int64)
        allowed_hour = np.zeros((n_jobs, n_sites, horizon), dtype=np.int64)
        switch_g = np.zeros((n_jobs, n_sites))
        offsets = np.arange(horizon)
        day = hourly[:, :24].mean(axis=1) if n_sites else np.zeros(0)

        for j, job in enumerate(jobs):
            end = min(job.deadline_hour - first_hour, horizon)
            begin = 0
            if (held := min(held_hours(job), int(need[j]), horizon)) and job.location in index:
                pinned[j], hold[j] = index[job.location], held
                capacity_hourly[pinned[j], :held] -= job.gpus
                need[j] -= held
                begin = held
            if job.not_before_hour is not None:
                begin = max(begin, job.not_before_hour - first_hour)
            for name in job.allowed:
                d = index.get(name)
                if d is None or sites[d].gpus < job.gpus:
                    continue
                start = begin
                if job.location is not None and name != job.location:
                    start += 0 if name == job.arriving_at else self.migration.delay_hours
                    energy = (
                        self.migration.transfer_kwh + self.migration.restart_hours * job.power_kw
                    )
                    switch_g[j, d] = energy * pue[d] * day[d]
                allowed_hour[j, d] = (offsets >= start) & (offsets < end)
            if job.deadline_hour - first_hour > horizon:  # the rest is planned by a later plan
                need[j] = min(need[j], int(allowed_hour[j].sum(axis=1).max(initial=0)))
        need = np.maximum(need, 0)
        # held jobs beyond a site's GPUs (its agent now reports fewer) leave none, not fewer than none
        capacity_hourly = np.maximum(capacity_hourly, 0)

        usable = (
            np.add.reduceat(allowed_hour, periods.offset, axis=2)
            if n_jobs
            else np.zeros((0, n_sites, periods.count), np.int64)
        )
        caps = np.array([site.power_cap_kw or np.inf for site in sites])
        priced = self._priced(periods, hourly)
        delay_price, finish_price, finish_from = _time_prices(jobs, need, pue, priced, allowed_hour)
        instance = Instance(
            periods=periods,
            need=need,
            gpus=gpus,
            power_kw=power,
            pue=pue,
            intensity=priced,
            capacity=np.add.reduceat(capacity_hourly, periods.offset, axis=1) / periods.length,
            usable=usable,
            switch_g=switch_g,
            power_cap_kw=caps if np.isfinite(caps).any() else None,
            optional=np.array([job.anticipated for job in jobs], dtype=bool),
            optional_quantile=self.anticipated_quantile,
            delay_price=delay_price if delay_price.any() else None,
            finish_price=finish_price if finish_price.any() else None,
            finish_from=finish_from if finish_price.any() else None,
            keep=self._keep(periods, jobs, sites, hourly, usable),
        )
        return instance, Held(pinned, hold)

    @staticmethod
    def _start(
        instance: Instance,
        periods: Periods,
        jobs: Sequence[JobSnapshot],
        sites: Sequence[SiteSnapshot],
        previous: PlanResult | None,
    ) -> np.ndarray:
        """The warm start: the previous plan's hours mapped onto this plan's periods, and the
        jobs it lacks placed greedily (earliest deadline first, cheapest free hours, best site),
        so the solver starts from a full plan instead of one that leaves new jobs unplaced."""
        index = {site.name: d for d, site in enumerate(sites)}
        period_of = periods.period_of_offset()
        grid = np.zeros(instance.shape, dtype=np.int64)
        old_jobs = previous.jobs if previous is not None else {}
        for j, job in enumerate(jobs):
            old = old_jobs.get(job.job_id)
            for hour, name, _ in old.slots if old is not None else ():
                offset = hour - periods.first_hour
                if name in index and held_hours(job) <= offset < periods.horizon:
                    grid[j, index[name], period_of[offset]] += 1
        return fill_greedily(instance, np.minimum(grid, instance.usable))


def fill_greedily(
    instance: Instance, grid: np.ndarray, cost: np.ndarray | None = None
) -> np.ndarray:
    """``grid`` completed: each job short of its hours (least flexible first) is emptied and placed
    whole at the allowed site where its cheapest hours with room cost least (``cost``: per hour,
    default the instance's), if one has room for all of them. Each job's sites are weighed in one
    vectorised pass (measured on the scale bench's 1000 x 12 re-plan, profiled: its four fills
    0.19 s, against 0.61 s site by site)."""
    free = instance.room() - np.einsum("j,jdt->dt", instance.gpus, grid)
    cost = instance.hour_cost() if cost is None else cost
    short = grid.sum(axis=(1, 2)) < instance.need
    flexibility = instance.usable.sum(axis=(1, 2))
    for j in np.argsort(flexibility, kind="stable"):  # least flexible first
        if not short[j]:
            continue
        grid[j] = 0
        room = np.minimum(
            instance.usable[j], np.floor(np.maximum(free, 0) / instance.gpus[j])
        ).astype(np.int64)
        enough = room.sum(axis=1) >= instance.need[j]
        if not enough.any():
            continue
        # (D, T): each site's hours, cheapest first
        order = np.argsort(cost[j], axis=1, kind="stable")
        ranked = np.take_along_axis(room, order, axis=1)
        hours = np.clip(instance.need[j] - (np.cumsum(ranked, axis=1) - ranked), 0, ranked)
        total = (hours * np.take_along_axis(cost[j], order, axis=1)).sum(axis=1)
        total = np.where(enough, total + instance.switch_g[j], np.inf)
        d = int(np.argmin(total))
        if not np.isfinite(total[d]):
            continue
        grid[j, d, order[d]] = hours[d]
        free[d] -= instance.gpus[j] * grid[j, d]
    return grid


def _arrival(job: JobSnapshot, previous: PlanResult | None, first_hour: int) -> JobSnapshot:
    """A job that an earlier hour's plan moved to a new site starting now has sat out its transfer
    delay already; delaying it again at every re-plan would push a move (and the deadline) back
    hour after hour (measured: a month of re-planning missed deadlines that way). A plan of this
    same hour can only have it there if it was waived already, so that carries over too."""
    if previous is None or job.location is None or held_hours(job):
        return job
    planned = previous.jobs.get(job.job_id)
    site = planned.at(first_hour) if planned is not None else None
    return dataclasses.replace(job, arriving_at=site) if site not in (None, job.location) else job


def _impossible(job: JobSnapshot, sites: Sequence[SiteSnapshot]) -> Infeasibility | None:
    allowed = [site for site in sites if site.name in job.allowed]
    if not allowed:
        return Infeasibility(
            job.job_id,
            "no allowed datacenter is available (data residency)",
            None,
            InfeasibleSituation.no_datacenter,
        )
    largest = max(site.gpus for site in allowed)
    if largest == 0:
        return Infeasibility(
            job.job_id,
            "no allowed datacenter has GPUs available (its agents are lost)",
            None,
            InfeasibleSituation.no_datacenter,
        )
    if largest < job.gpus:
        return Infeasibility(
            job.job_id,
            f"needs {job.gpus} GPUs; the largest allowed datacenter has {largest}",
            None,
            InfeasibleSituation.too_large,
        )
    return None


def _late_reason(job: JobSnapshot, finish: int) -> str:
    return (
        f"{job.need_hours} h on {job.gpus} GPUs cannot finish by the deadline with the capacity left; "
        f"the earliest feasible finish is {finish - job.deadline_hour} h later"
    )


def _time_prices(
    jobs: Sequence[JobSnapshot],
    need: np.ndarray,
    pue: np.ndarray,
    priced: np.ndarray,
    allowed_hour: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The jobs' prices of delay and of a late finish (their preferences), and the hour from
    which each finish is priced: its earliest possible finish."""
    preferences = [job.preference for job in jobs]
    delay_price, finish_price = time_prices(preferences, need, fastest_price(pue, priced))
    anywhere = np.asarray(allowed_hour.sum(axis=1) > 0)  # (J, horizon): may run somewhere
    finish_from = np.where(anywhere.any(axis=1), anywhere.argmax(axis=1), 0) + need - 1
    return delay_price, finish_price, finish_from.astype(float)


def _residual(
    instance: Instance,
    periods: Periods,
    solution: Solution,
    sites: Sequence[SiteSnapshot],
    pinned: Held,
    jobs: Sequence[JobSnapshot],
) -> np.ndarray:
    """Hourly free GPUs per site after the plan (late jobs' own hours removed)."""
    hours = solution.hours(instance.shape).astype(float)
    late = solution.unmet > 0
    hours[late | ~instance.integral()] = 0  # room a late job may take (anticipated jobs: none)
    used = np.einsum("j,jdt->dt", instance.gpus.astype(float), hours)
    per_hour = (
        used[:, periods.period_of_offset()] / np.repeat(periods.length, periods.length)[None, :]
    )
    free = np.array([[site.gpus] for site in sites], dtype=float) - per_hour
    for j, d in enumerate(pinned.site):
        if d >= 0 and not late[j]:
            free[d, : pinned.hours[j]] -= jobs[j].gpus
    return np.asarray(free)


def _earliest_finish(
    job: JobSnapshot,
    sites: Sequence[SiteSnapshot],
    residual: np.ndarray,
    first_hour: int,
    migration: MigrationPolicy,
) -> int:
    """Earliest epoch hour by which ``job`` can have run all its hours at one allowed site
    (hours with enough free GPUs in the plan; after the horizon, the site's full capacity)."""
    best = None
    for d, site in enumerate(sites):
        if site.name not in job.allowed or site.gpus < job.gpus:
            continue
        start = 0
        if job.location is not None and site.name != job.location:
            start = (0 if site.name == job.arriving_at else migration.delay_hours) + held_hours(job)
        if job.not_before_hour is not None:
            start = max(start, job.not_before_hour - first_hour)
        fits = residual[d] >= job.gpus - 1e-9
        fits[:start] = False
        count = np.cumsum(fits)
        if count[-1] >= job.need_hours:
            finish = int(np.searchsorted(count, job.need_hours)) + 1
        else:
            finish = len(fits) + job.need_hours - int(count[-1])
        best = finish if best is None else min(best, finish)
    return first_hour + int(best if best is not None else job.need_hours)


def _read_plan(
    first_hour: int,
    periods: Periods,
    instance: Instance,
    solution: Solution,
    jobs: Sequence[JobSnapshot],
    sites: Sequence[SiteSnapshot],
    hourly: np.ndarray,
    pinned: Held,
) -> dict[UUID, PlannedJob]:
    """Hours of each job. Inside a block the model only fixed how many hours a job runs there;
    they go to the block's cleanest hours before the deadline that still have GPUs free (the
    block's capacity holds in total, so room exists except for packing; then the least used)."""
    hours = solution.hours(instance.shape)
    horizon = periods.horizon
    used = np.zeros((len(sites), horizon))
    for j, d in enumerate(pinned.site):
        if d >= 0:
            used[d, : pinned.hours[j]] += jobs[j].gpus
    capacity = np.array([site.gpus for site in sites], dtype=float)
    chosen: dict[int, list[tuple[int, int]]] = {
        j: [(h, int(d)) for h in range(int(pinned.hours[j]))] if d >= 0 else []
        for j, d in enumerate(pinned.site)
    }
    hours[instance.optional] = 0  # anticipated jobs hold room in the model only
    cell_job, cell_dc, cell_period = np.nonzero(hours)
    single = periods.length[cell_period] == 1
    # single hours first, all at once: they have no choice (their hour, if before the deadline)
    deadline = np.array([job.deadline_hour - first_hour for job in jobs], dtype=np.int64)
    gpus = np.array([job.gpus for job in jobs], dtype=float)
    j1, d1, h1 = cell_job[single], cell_dc[single], periods.offset[cell_period[single]]
    kept = h1 < deadline[j1]
    j1, d1, h1 = j1[kept], d1[kept], h1[kept]
    np.add.at(used, (d1, h1), gpus[j1])
    for j, h, d in zip(j1.tolist(), h1.tolist(), d1.tolist(), strict=True):
        chosen[j].append((h, d))
    for j, d, t in zip(cell_job[~single], cell_dc[~single], cell_period[~single], strict=True):
        begin, length = int(periods.offset[t]), int(periods.length[t])
        window = np.arange(begin, min(begin + length, jobs[j].deadline_hour - first_hour))
        fits = used[d, window] + jobs[j].gpus <= capacity[d] + 1e-9
        order = np.lexsort((hourly[d, window], ~fits))  # hours with room first, cleanest first
        picked = window[order][: int(hours[j, d, t])]
        used[d, picked] += jobs[j].gpus
        chosen[j].extend((int(h), int(d)) for h in picked)
    planned: dict[UUID, PlannedJob] = {}
    for j, job in enumerate(jobs):
        if not chosen[j]:
            continue
        kwh = job.kwh_per_hour(len(chosen[j]))
        slots = tuple(
            (h + first_hour, sites[d].name, kwh * sites[d].pue * float(hourly[d, h]))
            for h, d in sorted(chosen[j])
        )
        planned[job.job_id] = PlannedJob(job.job_id, slots)
    return planned


def run_now_at_home(job: JobSnapshot, sites: Sequence[SiteSnapshot], hourly: np.ndarray) -> float:
    """The baseline: the remaining hours at the submitter's datacenter, starting now."""
    for d, site in enumerate(sites):
        if site.name == job.home:
            return float(job.kwh_per_hour() * site.pue * hourly[d, : job.need_hours].sum())
    return 0.0
