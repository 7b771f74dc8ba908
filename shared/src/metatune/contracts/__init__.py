"""Pydantic contracts of every MetaTune subject. Import from here, not from the submodules."""

from .agents import AgentStatus
from .base import SCHEMA_VERSION, Contract, Event
from .clock import ClockAnchor, ClockTick
from .datasets import (
    CarbonPreference,
    DatasetFormat,
    DatasetLocation,
    DatasetProfiled,
    DatasetSubmitted,
    MetaFeatures,
    RegionGroup,
    StudySpec,
    TaskType,
)
from .errors import ErrorEvent, ErrorKind
from .forecasts import HORIZON_HOURS, CarbonForecast
from .health import ServiceHealth
from .jobs import (
    InfeasibleAction,
    InfeasibleOption,
    InfeasibleSituation,
    JobCancelled,
    JobInfeasible,
    JobRequested,
    LoraConfig,
    LrSchedule,
    PredictionSource,
    StopReason,
    StudyStopped,
)
from .runs import (
    CurvePoint,
    FailureReason,
    Hardware,
    HourlyEnergy,
    RunAccounting,
    RunCompleted,
    RunFailed,
    RunMetrics,
    RunPaused,
    RunProgress,
)
from .schedule import Assignment, AssignmentAction, CurrentAssignment, Plan, PlanEntry

__all__ = [
    "HORIZON_HOURS",
    "SCHEMA_VERSION",
    "AgentStatus",
    "Assignment",
    "AssignmentAction",
    "CarbonForecast",
    "CarbonPreference",
    "ClockAnchor",
    "ClockTick",
    "Contract",
    "CurrentAssignment",
    "CurvePoint",
    "DatasetFormat",
    "DatasetLocation",
    "DatasetProfiled",
    "DatasetSubmitted",
    "ErrorEvent",
    "ErrorKind",
    "Event",
    "FailureReason",
    "Hardware",
    "HourlyEnergy",
    "InfeasibleAction",
    "InfeasibleOption",
    "InfeasibleSituation",
    "JobCancelled",
    "JobInfeasible",
    "JobRequested",
    "LoraConfig",
    "LrSchedule",
    "MetaFeatures",
    "Plan",
    "PlanEntry",
    "PredictionSource",
    "RegionGroup",
    "RunAccounting",
    "RunCompleted",
    "RunFailed",
    "RunMetrics",
    "RunPaused",
    "RunProgress",
    "ServiceHealth",
    "StopReason",
    "StudySpec",
    "StudyStopped",
    "TaskType",
]
