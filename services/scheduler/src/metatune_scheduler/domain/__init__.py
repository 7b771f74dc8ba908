"""Pure scheduling logic: no bus, no clock reads; everything here is testable in-process."""

from .highs_builder import HighsModelSolver, SolveLimits
from .horizon import Aggregation, Periods
from .instance import Instance
from .planner import JobSnapshot, MigrationPolicy, Planner, PlanResult, SiteSnapshot
from .scheduler import Decision, Scheduler
from .state import JobStatus, Pace, SchedulerState

__all__ = [
    "Aggregation",
    "Decision",
    "HighsModelSolver",
    "Instance",
    "JobSnapshot",
    "JobStatus",
    "MigrationPolicy",
    "Pace",
    "Periods",
    "PlanResult",
    "Planner",
    "Scheduler",
    "SchedulerState",
    "SiteSnapshot",
    "SolveLimits",
]
