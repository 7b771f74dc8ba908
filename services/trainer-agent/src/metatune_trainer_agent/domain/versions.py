"""Which assignments an agent may still act on: never one older than what it has seen for the job.

Two sources, because each misses cases the other sees: the highest ``plan_version`` this process
has received per job (in memory, lost on restart), and the job's current assignment the scheduler
keeps in KV (``metatune_assignments``, survives restarts: a killed agent's unacknowledged start,
redelivered after the job was paused or moved elsewhere, differs from it).
"""

from __future__ import annotations

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
