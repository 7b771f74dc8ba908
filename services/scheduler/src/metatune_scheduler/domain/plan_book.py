"""The plan as folded from its events, and a new version as events that carry only its changes.

A whole plan of 10,000 jobs is ~1.7 MB of JSON, over NATS's 1 MB payload limit, and most of
it repeats the previous version; so a version is published as the jobs whose stretches changed
(and the jobs dropped), split into parts that each stay under :data:`PART_BYTES`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID, uuid5

from metatune.contracts import Plan, PlanEntry

from .horizon import epoch_hour, from_epoch_hour
from .ids import NAMESPACE
from .planner import PlannedJob, PlanResult

PART_BYTES = 512 * 1024  # half of NATS's default max_payload: room for headers and growth

Stretch = tuple[str, tuple[int, ...], float]  # datacenter, epoch hours, gCO2eq


@dataclass
class PlanBook:
    """The current plan: every job's stretches, the version and hour it belongs to, its totals."""

    plan_version: int
    horizon_start: datetime
    stretches: dict[UUID, tuple[Stretch, ...]] = field(default_factory=dict)
    expected_emissions_g: float = 0.0
    baseline_emissions_g: float = 0.0

    @property
    def entries(self) -> list[PlanEntry]:
        """The whole plan as entries (for inspection; the book itself keeps stretches)."""
        return [
            PlanEntry(
                job_id=job_id,
                datacenter=dc,
                hours=[from_epoch_hour(h) for h in hours],
                emissions_g=grams,
            )
            for job_id, stretches in self.stretches.items()
            for dc, hours, grams in stretches
        ]

    def fold(self, event: Plan) -> None:
        """Fold one part of a newer-or-equal version (a whole plan resets the book)."""
        if not event.changes_only:
            self.stretches = {}
        self.plan_version, self.horizon_start = event.plan_version, event.horizon_start
        self.expected_emissions_g, self.baseline_emissions_g = (
            event.expected_emissions_g,
            event.baseline_emissions_g,
        )
        for job_id in event.removed_jobs:
            self.stretches.pop(job_id, None)
        replaced: dict[UUID, list[Stretch]] = {}
        for entry in event.entries:
            replaced.setdefault(entry.job_id, []).append(
                (entry.datacenter, tuple(epoch_hour(h) for h in entry.hours), entry.emissions_g)
            )
        self.stretches.update((job_id, tuple(s)) for job_id, s in replaced.items())

    @classmethod
    def of(cls, event: Plan) -> PlanBook:
        book = cls(event.plan_version, event.horizon_start)
        book.fold(event)
        return book

    def result(self) -> PlanResult:
        """The book as a plan result (the warm start of the next solve)."""
        jobs = {}
        for job_id, stretches in self.stretches.items():
            slots = sorted(
                (h, dc, grams / max(len(hours), 1)) for dc, hours, grams in stretches for h in hours
            )
            jobs[job_id] = PlannedJob(job_id, tuple(slots))
        return PlanResult(epoch_hour(self.horizon_start), jobs, self.baseline_emissions_g)


# Job ids in the order of their text (fixed-width hex: the order of the 128-bit number), without
# formatting 10,000 of them as text on every plan version.
IN_TEXT_ORDER = operator.attrgetter("int")


def stretches_of(job: PlannedJob) -> tuple[Stretch, ...]:
    """A planned job's hours grouped by datacenter, in the order it gets there."""
    by_dc: dict[str, list[tuple[int, float]]] = {}
    for h, dc, grams in job.slots:
        by_dc.setdefault(dc, []).append((h, grams))
    return tuple(
        (dc, tuple(h for h, _ in slots), sum(g for _, g in slots)) for dc, slots in by_dc.items()
    )


def _same(a: tuple[Stretch, ...], b: tuple[Stretch, ...] | None) -> bool:
    return b is not None and [(dc, hours) for dc, hours, _ in a] == [
        (dc, hours) for dc, hours, _ in b
    ]


def plan_events(
    result: PlanResult,
    book: PlanBook | None,
    version: int,
    now: datetime,
    *,
    changed: Iterable[UUID] | None = None,
    expected_g: float | None = None,
    baseline_g: float | None = None,
    part_bytes: int = PART_BYTES,
) -> list[Plan]:
    """Version ``version`` of the plan as the changes from ``book``, in parts of at most
    ``part_bytes`` of JSON; [] when nothing changed within the same hour. ``changed``: only these
    jobs can have changed (the fast path: the rest of ``book`` stands, and its ``infeasible`` alone
    is news); totals default to ``result``'s. Grams are the jobs' energy as the agents meter it
    (the energy model: :meth:`.JobRecord.remaining_energy_kwh`) at the forecast intensity."""
    first = from_epoch_hour(result.first_hour)
    ids = result.jobs.keys() if changed is None else changed
    entries: list[PlanEntry] = []
    for job_id in sorted(ids, key=IN_TEXT_ORDER):
        stretches = stretches_of(result.jobs[job_id])
        if book is not None and _same(stretches, book.stretches.get(job_id)):
            continue
        entries.extend(
            PlanEntry(
                job_id=job_id,
                datacenter=dc,
                hours=[from_epoch_hour(h) for h in hours],
                emissions_g=g,
            )
            for dc, hours, g in stretches
        )
    removed = (
        []
        if book is None or changed is not None
        else sorted(
            (job_id for job_id in book.stretches if job_id not in result.jobs), key=IN_TEXT_ORDER
        )
    )
    infeasible = [item.job_id for item in result.infeasible]
    news = bool(entries or removed or (changed is not None and infeasible))
    if not news and (
        book is None or book.horizon_start == first
    ):  # nothing to plan yet, or the same plan
        return []
    head = Plan(
        event_id=uuid5(NAMESPACE, f"plan/{version}/{result.first_hour}"),
        occurred_at=now,
        plan_version=version,
        horizon_start=first,
        entries=[],
        expected_emissions_g=result.emissions_g if expected_g is None else expected_g,
        baseline_emissions_g=result.baseline_g if baseline_g is None else baseline_g,
        solve_seconds=result.solve_seconds,
        mip_gap=result.mip_gap,
        changes_only=True,
    )
    chunks = _chunks(entries, removed, infeasible, part_bytes - len(head.to_bytes()))
    return [
        head.model_copy(
            update={
                "event_id": head.event_id
                if part == 0
                else uuid5(NAMESPACE, f"plan/{version}/{result.first_hour}/{part}"),
                "entries": chunk_entries,
                "removed_jobs": chunk_removed,
                "infeasible_jobs": chunk_infeasible,
                "part": part,
                "parts": len(chunks),
            }
        )
        for part, (chunk_entries, chunk_removed, chunk_infeasible) in enumerate(chunks)
    ]


def _chunks(
    entries: list[PlanEntry], removed: list[UUID], infeasible: list[UUID], budget: int
) -> list[tuple[list[PlanEntry], list[UUID], list[UUID]]]:
    """Greedy packing by JSON size; one job's entries stay in one part (they replace together)."""
    chunks: list[tuple[list[PlanEntry], list[UUID], list[UUID]]] = [([], [], [])]
    size = 0

    def room(needed: int) -> tuple[list[PlanEntry], list[UUID], list[UUID]]:
        nonlocal size
        if size + needed > budget and size > 0:
            chunks.append(([], [], []))
            size = 0
        size += needed
        return chunks[-1]

    i = 0
    while i < len(entries):
        j = i
        while j < len(entries) and entries[j].job_id == entries[i].job_id:
            j += 1
        group = entries[i:j]
        room(sum(_entry_bytes(entry) for entry in group))[0].extend(group)
        i = j
    for job_id in removed:
        room(39)[1].append(job_id)
    for job_id in infeasible:
        room(39)[2].append(job_id)
    return chunks


def _entry_bytes(entry: PlanEntry) -> int:
    """An upper bound of the entry's JSON (~100 bytes + 23 per hour; serialising each to measure
    costs ~0.1 s per 10,000 entries on the event loop)."""
    return 128 + len(entry.datacenter) + 32 * len(entry.hours)
