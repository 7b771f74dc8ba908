"""The fast path: new jobs placed at once into the room the current plan leaves.

A full solve re-plans every active job (seconds with thousands of them), so a job requested
between two solves would wait for the next one. Instead it is placed greedily at its cheapest
allowed datacenter and hours that still have GPUs free, before its deadline, and that is its
first decision; the next full solve (coalesced, authoritative) may move it. A job with no such
room is left to the full solve, which alone may relax a deadline or report it infeasible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

import numpy as np

from .planner import JobSnapshot, PlannedJob, PlanResult, SiteSnapshot
from .preferences import fastest_price, priced_hours


def load(
    plan: PlanResult,
    gpus: Mapping[UUID, int],
    sites: Sequence[SiteSnapshot],
    first_hour: int,
    horizon: int,
) -> np.ndarray:
    """(sites, hours) GPUs ``plan`` uses from ``first_hour``; jobs missing from ``gpus`` (finished,
    cancelled) no longer hold theirs."""
    index = {site.name: d for d, site in enumerate(sites)}
    used = np.zeros((len(sites), horizon))
    for job in plan.jobs.values():
        if (n := gpus.get(job.job_id)) is None:
            continue
        for h, dc, _ in job.slots:
            if 0 <= h - first_hour < horizon and dc in index:
                used[index[dc], h - first_hour] += n
    return used


def place(
    jobs: Sequence[JobSnapshot],
    sites: Sequence[SiteSnapshot],
    used: np.ndarray,
    first_hour: int,
    delay_premium: float = 0.0,
) -> dict[UUID, PlannedJob]:
    """Each job at the allowed site and hours of least cost (the forecast plus ``delay_premium``
    per hour from now, and its carbon preference's price of time, as the full solve prices them:
    :mod:`.preferences`) where ``used`` leaves its GPUs free, before its deadline and not before
    it may start; least flexible (earliest deadline) first. ``used`` is updated in place; jobs
    without room are left out."""
    horizon = used.shape[1]
    offsets = np.arange(horizon)
    intensity = (
        np.stack([site.intensity[:horizon] for site in sites]) if sites else np.zeros((0, horizon))
    )
    priced = intensity + delay_premium * offsets[None, :]
    capacity = np.array([site.gpus for site in sites], dtype=float)
    spread = fastest_price(np.array([site.pue for site in sites], dtype=float), priced)
    placed: dict[UUID, PlannedJob] = {}
    for job in sorted(jobs, key=lambda j: (j.deadline_hour, str(j.job_id))):
        begin = max(0, (job.not_before_hour or first_hour) - first_hour)
        window = (offsets >= begin) & (offsets < min(job.deadline_hour - first_hour, horizon))
        best: tuple[float, int, np.ndarray] | None = None
        prices = priced_hours(priced, job.preference, begin, job.need_hours, spread)
        for d, site in enumerate(sites):
            if site.name not in job.allowed:
                continue
            free = np.nonzero(window & (used[d] + job.gpus <= capacity[d] + 1e-9))[0]
            if len(free) < job.need_hours:
                continue
            hours = free[np.argsort(prices[d, free], kind="stable")[: job.need_hours]]
            cost = job.power_kw * site.pue * float(prices[d, hours].sum())
            if best is None or cost < best[0]:
                best = (cost, d, np.sort(hours))
        if best is None:
            continue
        _, d, hours = best
        used[d, hours] += job.gpus
        grams = job.kwh_per_hour(len(hours)) * sites[d].pue * intensity[d, hours]
        placed[job.job_id] = PlannedJob(
            job.job_id,
            tuple(
                (first_hour + int(h), sites[d].name, float(g))
                for h, g in zip(hours, grams, strict=True)
            ),
        )
    return placed
