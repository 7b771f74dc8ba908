"""The scheduler's decision step: state + registry + clock hour -> plan, assignments, notices.

Pure and synchronous; a full solve is three steps (``prepare`` reads the state, ``solve`` runs
in a solver process or thread without it, ``conclude`` diffs against the state as it is then, or
drops a result the state has superseded meanwhile), and between
solves ``place_new`` is the fast path for new jobs. The caller publishes the outputs and folds
them back into the state, exactly as a replay of the stream would.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID, uuid5

import numpy as np

from metatune.contracts import (
    AgentStatus,
    Assignment,
    AssignmentAction,
    ErrorEvent,
    ErrorKind,
    Event,
    InfeasibleAction,
    InfeasibleOption,
    InfeasibleSituation,
    JobInfeasible,
    JobRequested,
    Plan,
    RegionGroup,
)
from metatune.registry import Datacenter, Registry

from . import fast_path
from .anticipation import Request, anticipated_jobs, history_hours
from .assignments import diff
from .horizon import ceil_epoch_hour, epoch_hour, from_epoch_hour
from .ids import NAMESPACE
from .plan_book import plan_events
from .planner import (
    Infeasibility,
    JobSnapshot,
    PlannedJob,
    Planner,
    PlanResult,
    SiteSnapshot,
    run_now_at_home,
)
from .state import JobRecord, JobStatus, Pace, SchedulerState
from .uncertainty import planned_intensity


@dataclass(frozen=True)
class Decision:
    result: PlanResult
    plans: list[Plan]  # the parts of a new version; []: the plan did not change
    assignments: list[Assignment] = field(default_factory=list)
    infeasible: list[JobInfeasible] = field(default_factory=list)
    # a full solve's result no longer current (:meth:`Scheduler.current`): nothing to publish
    superseded: bool = False

    @property
    def plan(self) -> Plan | None:
        """The new version's first part (None: same plan as the last one published)."""
        return self.plans[0] if self.plans else None

    def events(self) -> list[Event]:
        """Outputs in publication order: notices, then the plan, then the changes it implies."""
        return [*self.infeasible, *self.plans, *self.assignments]


@dataclass(frozen=True)
class Solve:
    """What a full solve reads, taken under the runtime's lock; the solve runs without it, so
    events (and the fast path) go on meanwhile."""

    now: datetime
    hour: int
    jobs: list[JobSnapshot]
    sites: list[SiteSnapshot]
    previous: PlanResult | None
    considered: frozenset[UUID]  # the jobs it plans: any other pending job arrived while it ran


@dataclass(frozen=True)
class _Moment:
    """What the snapshots of every job in one solve or fast path share: read once, not per job."""

    now: datetime
    known: frozenset[str]  # datacenters with a forecast
    committed: bool  # this hour's plan is out: its running jobs are pinned where they run
    pace: Pace  # with the latest measured start-up


class Scheduler:
    def __init__(
        self,
        registry: Registry,
        planner: Planner | None = None,
        anticipate_h: int = 0,
        anticipation_days: int = 1,
        pace: Pace | None = None,
    ) -> None:
        """``anticipate_h``: the plan keeps room for the jobs expected over the next that many
        hours, from the requests of the ``anticipation_days`` most recent days at the same hours
        (:mod:`.anticipation`); 0: none. ``pace``: minimum run and start-up cost (:class:`.Pace`)."""
        self.registry = registry
        self.planner = planner or Planner()
        self.anticipate_h = anticipate_h
        self.anticipation_days = anticipation_days
        self.state = SchedulerState(pace=pace or Pace())
        self.lost: set[str] = set()  # datacenters whose agent is silent past its lease: capacity 0
        # datacenters with a live agent: heard (a heartbeat folded) or expected (after a restart,
        # where jobs are believed to run) and not lost since; any other has capacity 0
        self.live: set[str] = set()
        self._room: tuple[tuple[object, ...], np.ndarray] | None = (
            None  # GPUs in use after the last fast path, and for which plan
        )
        self._unplaced: dict[UUID, None] = {}  # requested since the fast path last ran (ordered)
        self._arrived: list[UUID] = []  # requested since the last full solve read the state

    def apply(self, event: Event) -> bool:
        back = False
        if isinstance(event, AgentStatus):  # a heartbeat: the agent is live, its GPUs count
            back = event.datacenter not in self.live
            self.agent_back(event.datacenter)
        applied = self.state.apply(event) or back
        if applied and isinstance(event, JobRequested):
            self._unplaced[event.job_id] = None
            self._arrived.append(event.job_id)
        return applied

    def running_at(self, datacenter: str) -> list[JobRecord]:
        return [
            job
            for job in self.state.active_jobs()
            if job.status is JobStatus.running and job.location == datacenter
        ]

    def agent_lost(self, datacenter: str, now: datetime, silent_s: float) -> list[Event]:
        """The agent of ``datacenter`` is gone: no capacity there until it is heard again, and each
        job it ran is paused at its last checkpoint (``checkpoints/<job_id>``, written by the agent
        every ``checkpoint_every`` steps) so the next plan resumes it elsewhere; a job cancelled
        while running there is stopped. The pause goes to the lost datacenter's subject: if its
        agent was only cut off, it pauses when it hears again (and the assignment KV tells it the
        job has moved). Returns the events to publish (and fold): one notice, then the changes."""
        self.lost.add(datacenter)
        self.live.discard(datacenter)
        version = self.state.last_plan.plan_version if self.state.last_plan else 0
        changes: list[Assignment] = []
        for job in sorted(self.running_at(datacenter), key=lambda record: str(record.job_id)):
            action = AssignmentAction.stop if job.stopping else AssignmentAction.pause
            since = job.run_since.isoformat() if job.run_since else "-"
            changes.append(
                Assignment(
                    event_id=uuid5(NAMESPACE, f"{job.job_id}/lost/{datacenter}/{since}"),
                    occurred_at=now,
                    job_id=job.job_id,
                    study_id=job.request.study_id,
                    datacenter=datacenter,
                    action=action,
                    plan_version=version,
                    gpus=job.request.gpus,
                    checkpoint_key=job.checkpoint_key
                    or str(job.job_id),  # the agent's checkpoint key: the job id
                )
            )
        jobs = [str(change.job_id) for change in changes]
        notice = ErrorEvent(
            event_id=uuid5(NAMESPACE, f"agent-lost/{datacenter}/{version}/{','.join(jobs)}"),
            occurred_at=now,
            service="scheduler",
            kind=ErrorKind.unavailable,
            code="agent_lost",
            message=(
                f"trainer-agent of {datacenter} silent for {silent_s:.0f} s: capacity 0 there"
                + (f"; {len(jobs)} job(s) re-planned from their last checkpoint" if jobs else "")
            ),
            details={"datacenter": datacenter, "jobs": jobs},
        )
        return [notice, *changes]

    def agent_back(self, datacenter: str) -> None:
        """The agent of ``datacenter`` is heard: its reported GPUs count again."""
        self.lost.discard(datacenter)
        self.live.add(datacenter)

    def agent_expected(self, datacenter: str) -> None:
        """Jobs are believed to run at ``datacenter`` but its agent has not been heard yet (a
        restarted scheduler): live until its lease says otherwise, with room for those jobs only."""
        if datacenter not in self.lost:
            self.live.add(datacenter)

    def capacity(self, datacenter: Datacenter) -> int:
        """GPUs the plan may use at ``datacenter``: what its live agent reports, the registry's
        figure only the ceiling; 0 with no live agent (never heard from, or lost). An agent expected
        but not heard yet keeps the room of the jobs believed to run there, and no more."""
        if datacenter.name not in self.live:
            return 0
        reported = self.state.capacity.get(datacenter.name)
        if reported is None:
            reported = sum(job.request.gpus for job in self.running_at(datacenter.name))
        return min(reported, datacenter.gpus)

    def replan(self, now: datetime) -> Decision:
        """One full solve, synchronously (what the runtime does in three steps)."""
        solve = self.prepare(now)
        return self.conclude(solve, self.solve(solve), now)

    def prepare(self, now: datetime) -> Solve:
        hour = epoch_hour(now)
        sites = self._sites(hour)
        moment = self._moment(now, sites)
        jobs = [self._snapshot(job, moment) for job in self.state.plannable_jobs()]
        planned = [job for job in jobs if job is not None]
        considered = frozenset(job.job_id for job in planned)
        self._arrived = []
        since = self.state.first_requested_at  # set once any job is planned
        if planned and self.anticipate_h and since is not None:
            planned += anticipated_jobs(
                self._recent_requests(hour, moment.known),
                hour,
                self.anticipate_h,
                self.anticipation_days,
                observed_since=epoch_hour(since),
            )
        previous = self.state.last_plan.result() if self.state.last_plan is not None else None
        return Solve(now, hour, planned, sites, previous, considered)

    def solve(self, solve: Solve) -> PlanResult:
        return full_solve(self.planner, solve)

    def current(self, solve: Solve) -> bool:
        """Whether the datacenters ``solve`` planned on still hold: the same ones, with the GPUs and
        the forecast it read. Jobs requested, ended or placed meanwhile do not make a result stale
        (:meth:`conclude` reconciles them); capacity and forecasts do: an agent lost or back, or a
        new forecast, would have the result send jobs where there is no room now, or to hours an
        old forecast priced. The event that changed them has asked for the next solve."""
        sites = self._sites(solve.hour)
        return len(sites) == len(solve.sites) and all(
            now.name == then.name
            and now.gpus == then.gpus
            and now.pue == then.pue
            and np.array_equal(now.intensity, then.intensity)
            for now, then in zip(sites, solve.sites, strict=True)
        )

    def conclude(self, solve: Solve, result: PlanResult, now: datetime) -> Decision:
        """The decision from a full solve's ``result``, given the state as it is now: jobs that
        ended meanwhile are dropped, jobs requested meanwhile are placed by the fast path into
        what the result leaves free; no assignment if the hour turned meanwhile. A result that
        is no longer :meth:`current` is superseded: nothing is applied (the fast path has placed,
        or will place, the jobs requested meanwhile; the next solve plans every job)."""
        if not self.current(solve):
            return Decision(result, [], superseded=True)
        records = {job.job_id: job for job in self.state.plannable_jobs()}
        if any(job_id not in records for job_id in result.jobs):
            result = dataclasses.replace(
                result, jobs={k: v for k, v in result.jobs.items() if k in records}
            )
        book = self.state.last_plan
        unseen = {
            job_id
            for job_id in records
            if book is not None and job_id not in solve.considered and job_id in book.stretches
        }
        if book is not None and unseen:
            # placed by the fast path while the solve ran (and maybe started already): they keep
            # that placement, or the diff would pause a job the solve never saw
            current = book.result().jobs
            result = dataclasses.replace(
                result, jobs={**result.jobs, **{job_id: current[job_id] for job_id in unseen}}
            )
        arrived = [
            job
            for job in self._fresh(records[job_id] for job_id in self._arrived if job_id in records)
            if job.job_id not in solve.considered and job.job_id not in unseen
        ]
        if arrived:
            hour = max(
                result.first_hour, epoch_hour(now)
            )  # the hour may have turned during the solve
            sites = self._sites(hour)
            used = fast_path.load(
                result, _gpus(records), sites, hour, self.planner.aggregation.horizon
            )
            placed, baseline = self._place(arrived, sites, used, now, hour)
            result = dataclasses.replace(
                result, jobs={**result.jobs, **placed}, baseline_g=result.baseline_g + baseline
            )

        last = self.state.last_plan
        version = 0 if last is None else last.plan_version + 1
        plans = plan_events(result, last, version, now)
        if not plans and last is not None:
            version = last.plan_version
        notices = [
            notice
            for item in result.infeasible
            if item.job_id in records
            and (notice := _notice(item, records[item.job_id], now)) is not None
            and not self.state.seen(notice.event_id)
        ]
        # A plan decides the hour it was made for: if the hour turned during the solve, its
        # first hour is gone (a job held or committed until then would be paused by it); the new
        # hour's tick has already asked for the solve that decides this one.
        changes = (
            diff(result, self.state.active_jobs(), now, version)
            if epoch_hour(now) == solve.hour
            else []
        )
        return Decision(result, plans, changes, notices)

    def place_new(self, now: datetime) -> Decision | None:
        """The fast path: the jobs requested since it last ran placed into the room the current
        plan leaves (:mod:`.fast_path`), published as a version carrying only those jobs; one
        with no room before its deadline is listed in that version's ``infeasible_jobs`` (the
        next full solve decides it and reports it). None when there is nothing new. A version
        keeps the current plan's ``horizon_start``, even of an earlier hour: the first plan of an
        hour commits its running jobs, so that one stays a full solve's."""
        book, hour = self.state.last_plan, epoch_hour(now)
        jobs = self.state.jobs
        fresh = self._fresh(
            jobs[job_id]
            for job_id in self._unplaced
            if jobs[job_id].cancel_reason is None and (book is None or job_id not in book.stretches)
        )
        self._unplaced.clear()
        if not fresh:
            return None
        sites = self._sites(hour)
        version = 0 if book is None else book.plan_version + 1
        key = (version - 1, hour, tuple(site.name for site in sites))
        if self._room is not None and self._room[0] == key:
            used = self._room[1]
        else:
            records = {job.job_id: job for job in self.state.plannable_jobs()}
            base = book.result() if book is not None else PlanResult(hour, {}, 0.0)
            used = fast_path.load(
                base, _gpus(records), sites, hour, self.planner.aggregation.horizon
            )
        placed, baseline = self._place(fresh, sites, used, now, hour)
        self._room = (
            (version, hour, key[2]),
            used,
        )  # what the book holds once this decision is folded
        full = [
            Infeasibility(job.job_id, "no room left by the current plan", None)
            for job in fresh
            if job.job_id not in placed
        ]
        result = PlanResult(
            epoch_hour(book.horizon_start) if book else hour,
            placed,
            baseline,
            full,
            solve_seconds=0.0,
        )
        plans = plan_events(
            result,
            book,
            version,
            now,
            changed=placed,
            expected_g=(book.expected_emissions_g if book else 0.0) + result.emissions_g,
            baseline_g=(book.baseline_emissions_g if book else 0.0) + baseline,
        )
        return Decision(
            result, plans, diff(result, [jobs[job_id] for job_id in placed], now, version)
        )

    @staticmethod
    def _fresh(records: Iterable[JobRecord]) -> list[JobRecord]:
        """Jobs requested and never placed: what the fast path may place (no site to move from,
        no deadline the full solve has relaxed)."""
        return [
            job
            for job in records
            if job.status is JobStatus.pending and job.infeasible_reason is None
        ]

    def _place(
        self,
        jobs: list[JobRecord],
        sites: list[SiteSnapshot],
        used: np.ndarray,
        now: datetime,
        hour: int,
    ) -> tuple[dict[UUID, PlannedJob], float]:
        """``jobs`` placed by the fast path where ``used`` (updated) leaves room, and their run-now baseline."""
        moment = self._moment(now, sites)
        snapshots = [snap for job in jobs if (snap := self._snapshot(job, moment)) is not None]
        placed = fast_path.place(snapshots, sites, used, hour, self.planner.delay_premium)
        horizon = used.shape[1]
        hourly = (
            np.stack([site.intensity[:horizon] for site in sites])
            if sites
            else np.zeros((0, horizon))
        )
        baseline = sum(
            run_now_at_home(job, sites, hourly) for job in snapshots if job.job_id in placed
        )
        return placed, baseline

    def _sites(self, hour: int) -> list[SiteSnapshot]:
        """Datacenters with a forecast, at their expected intensity: the plan minimises expected
        emissions, and the median runs below the mean on grids with upward spikes (measured on
        the ample month: S captures 69 % beyond greedy on the expected value, 62 % on the median),
        its interval widened where the forecast is stale or short of history (``uncertainty``)."""
        sites = []
        for dc in self.registry.datacenters:
            forecast = self.state.forecasts.get(dc.region)
            if forecast is None:  # not planned on until its grid has a forecast
                continue
            sites.append(
                SiteSnapshot(
                    name=dc.name,
                    pue=dc.pue,
                    gpus=self.capacity(dc),
                    intensity=planned_intensity(forecast, hour, self.planner.aggregation.horizon),
                )
            )
        return sites

    def _recent_requests(self, hour: int, known: frozenset[str]) -> list[Request]:
        """Every job requested within the hours anticipation looks back, as it was requested."""
        requests, back = [], history_hours(self.anticipate_h, self.anticipation_days)
        for job in self.state.jobs.values():
            requested = epoch_hour(job.request.occurred_at)
            if (
                job.request.earliest_start is not None
            ):  # announced ahead: demand of the hour it could start
                requested = max(requested, ceil_epoch_hour(job.request.earliest_start))
            if (
                hour - back < requested <= hour
                and (placement := self._placement(job, known)) is not None
            ):
                allowed, home = placement
                requests.append(
                    Request(
                        requested,
                        JobSnapshot(
                            job_id=job.job_id,
                            need_hours=job.requested_hours,
                            gpus=job.request.gpus,
                            power_kw=job.request.power_kw,
                            deadline_hour=epoch_hour(job.request.deadline),
                            allowed=allowed,
                            home=home,
                        ),
                    )
                )
        return requests

    def _placement(
        self, job: JobRecord, known: frozenset[str]
    ) -> tuple[frozenset[str], str] | None:
        """The datacenters a job may use (its region group, with a forecast) and its home."""
        spec = job.request.spec
        return self._placements(spec.region_group, spec.home_datacenter, known)

    @functools.lru_cache(maxsize=256)  # noqa: B019 - a few groups x homes; the scheduler lives as long as the service
    def _placements(
        self, group: RegionGroup | None, home: str | None, known: frozenset[str]
    ) -> tuple[frozenset[str], str] | None:
        allowed = frozenset(dc.name for dc in self.registry.in_group(group)) & known
        if not allowed:
            return None
        names = self.registry.names()
        return allowed, home if home in names else sorted(allowed, key=names.index)[0]

    def _moment(self, now: datetime, sites: list[SiteSnapshot]) -> _Moment:
        last = self.state.last_plan
        return _Moment(
            now,
            frozenset(site.name for site in sites),
            committed=last is not None and epoch_hour(last.horizon_start) == epoch_hour(now),
            pace=self.state.planning_pace(),
        )

    def _snapshot(self, job: JobRecord, moment: _Moment) -> JobSnapshot | None:
        placement = self._placement(job, moment.known)
        if placement is None:
            return None  # waits for a forecast of an allowed grid
        allowed, home = placement
        now, pace = moment.now, moment.pace
        return JobSnapshot(
            job_id=job.job_id,
            need_hours=job.remaining_hours(now, pace),
            gpus=job.request.gpus,
            power_kw=job.power_kw,
            # the plan's grams price this energy, as the agent meters it (one basis, any clock)
            energy_kwh=job.remaining_energy_kwh(),
            deadline_hour=epoch_hour(job.deadline),
            allowed=allowed,
            home=home,
            # a checkpoint left by a lost agent is in the object store: no move to pay for, nothing to wait on
            location=job.location
            if job.status in (JobStatus.running, JobStatus.paused) and job.location not in self.lost
            else None,
            pinned=moment.committed and job.status is JobStatus.running,
            hold_hours=job.hold_hours(now, pace) if job.location not in self.lost else 0,
            not_before_hour=ceil_epoch_hour(start)
            if (start := job.request.earliest_start) is not None
            else None,
            preference=job.request.spec.carbon_preference,
        )


def _notice(item: Infeasibility, job: JobRecord, now: datetime) -> JobInfeasible | None:
    """The notice of a job that cannot meet its deadline, with the options open to its submitter;
    None when its situation is the one last reported (a re-plan that finds it late again, or an
    earliest finish that moved, is no news). The scheduler's policy meanwhile: run late."""
    if job.situation is item.situation:
        return None
    finish = from_epoch_hour(item.earliest_finish_hour) if item.earliest_finish_hour else None
    late = item.situation is InfeasibleSituation.late
    options = [
        InfeasibleOption(
            action=InfeasibleAction.run_late,
            earliest_finish=finish,
            how="nothing to do: it stays planned and finishes after its deadline (the default)"
            if late
            else "nothing to do: it waits until a datacenter it may use can take it (the default)",
        ),
        InfeasibleOption(
            action=InfeasibleAction.drop,
            how=f"publish a JobCancelled on metatune.jobs.cancelled (metatune cancel {job.job_id})",
        ),
    ]
    anywhere = item.anywhere_finish_hour
    sooner = (
        anywhere is not None
        and item.earliest_finish_hour is not None
        and anywhere < item.earliest_finish_hour
    )
    if job.request.spec.region_group is not None and (not late or sooner):
        options.append(
            InfeasibleOption(
                action=InfeasibleAction.relax_residency,
                earliest_finish=from_epoch_hour(anywhere) if anywhere is not None else None,
                how="cancel it and submit the study again with a wider region_group (or none)",
            )
        )
    return JobInfeasible(
        event_id=uuid5(NAMESPACE, f"{job.job_id}/infeasible/{job.notices}/{item.situation}"),
        occurred_at=now,
        job_id=job.job_id,
        study_id=job.request.study_id,
        reason=item.reason,
        earliest_finish=finish,
        situation=item.situation,
        deadline=job.request.deadline,
        policy=InfeasibleAction.run_late,
        options=options,
    )


def _gpus(records: dict[UUID, JobRecord]) -> dict[UUID, int]:
    return {job_id: job.request.gpus for job_id, job in records.items()}


def full_solve(planner: Planner, solve: Solve) -> PlanResult:
    """The full solve: pure, reads only its arguments, so a worker thread or process can run it."""
    return planner.plan(solve.hour, solve.jobs, solve.sites, previous=solve.previous)
