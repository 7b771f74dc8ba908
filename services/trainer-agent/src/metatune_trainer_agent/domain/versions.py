"""Which assignments an agent may still act on: never one older than what it has seen for the job,
never one whose run already ended here.

For the versions, two sources, because each misses cases the other sees: the highest ``plan_version`` this process
has received per job (in memory, lost on restart), and the job's current assignment the scheduler
keeps in KV (``metatune_assignments``, survives restarts: a killed agent's unacknowledged start,
redelivered after the job was paused or moved elsewhere, differs from it). For ended runs, the
start or resume assignments whose outcome this agent published (``EndedAssignments``): a message
whose acknowledgement was lost (the bus went down as the run ended) comes back after ``ack_wait``
and must not train the job a second time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from metatune.contracts import Assignment, CurrentAssignment


@dataclass
class SeenVersions:
    highest: dict[UUID, int] = field(default_factory=dict)

    def observe(self, assignment: Assignment) -> str | None:
        """Record ``assignment``; returns why it is stale (older than one seen), else None."""
        seen = self.highest.get(assignment.job_id)
        if seen is not None and assignment.plan_version < seen:
            return f"plan version {assignment.plan_version} is older than version {seen} already seen for this job"
        self.highest[assignment.job_id] = assignment.plan_version
        return None


def superseded(assignment: Assignment, current: CurrentAssignment | None) -> str | None:
    """Why ``assignment`` must not run given the job's current assignment (None: it may)."""
    if current is None or not current.supersedes(assignment):
        return None
    return (
        f"superseded by {current.action.value} at {current.datacenter} (plan version {current.plan_version}, "
        f"event {current.event_id})"
    )


ENDED_KEPT = 10_000  # assignment event ids remembered; a redelivery comes within minutes


@dataclass
class EndedAssignments:
    """The event ids of the start/resume assignments whose run ended here (oldest first, bounded)."""

    ids: OrderedDict[UUID, None] = field(default_factory=OrderedDict)
    kept: int = ENDED_KEPT

    @classmethod
    def of(cls, ids: Iterable[UUID], kept: int = ENDED_KEPT) -> EndedAssignments:
        ended = cls(kept=kept)
        for event_id in ids:
            ended.add(event_id)
        return ended

    def add(self, event_id: UUID) -> None:
        self.ids[event_id] = None
        self.ids.move_to_end(event_id)
        while len(self.ids) > self.kept:
            self.ids.popitem(last=False)

    def why_not(self, assignment: Assignment) -> str | None:
        """Why ``assignment`` must not run again (None: it may)."""
        if assignment.event_id in self.ids:
            return f"its run already ended here (assignment {assignment.event_id}, redelivered)"
        return None
