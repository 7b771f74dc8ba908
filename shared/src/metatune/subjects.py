"""Every NATS subject MetaTune uses, in one place.

Subjects with a variable token (a region, a datacenter, a job, a service) are built by the
functions below so no service ever formats a subject string itself.
"""

from __future__ import annotations

import re
from uuid import UUID

PREFIX = "metatune"

DATASETS_SUBMITTED = "metatune.datasets.submitted"
DATASETS_PROFILED = "metatune.datasets.profiled"
JOBS_REQUESTED = "metatune.jobs.requested"
JOBS_INFEASIBLE = "metatune.jobs.infeasible"
JOBS_CANCELLED = "metatune.jobs.cancelled"
STUDIES_STOPPED = "metatune.studies.stopped"
PLANS = "metatune.plans"
RUNS_COMPLETED = "metatune.runs.completed"
RUNS_FAILED = "metatune.runs.failed"
RUNS_PAUSED = "metatune.runs.paused"
CLOCK_TICK = "metatune.clock.tick"

# Wildcards for consumers that follow a whole family.
FORECASTS_ALL = "metatune.forecasts.*"
ASSIGNMENTS_ALL = "metatune.assignments.*"
AGENTS_STATUS_ALL = "metatune.agents.*.status"
RUNS_PROGRESS_ALL = "metatune.runs.*.progress"
ERRORS_ALL = "metatune.errors.*"
EVERYTHING = "metatune.>"

# Subjects of the durable event log (stream METATUNE) and of the short-lived status stream
# (stream METATUNE_STATUS: heartbeats and clock ticks, capped per subject).
EVENT_STREAM_SUBJECTS = [
    "metatune.datasets.>",
    "metatune.jobs.>",
    "metatune.studies.>",
    "metatune.forecasts.>",
    "metatune.assignments.>",
    PLANS,
    "metatune.runs.>",
    "metatune.errors.>",
]
STATUS_STREAM_SUBJECTS = ["metatune.agents.>", "metatune.clock.>"]

_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


class InvalidSubjectToken(ValueError):
    """A region, datacenter or service name that cannot be a NATS subject token."""


def token(value: str) -> str:
    """Check that ``value`` is a single safe subject token (no dots, spaces or wildcards)."""
    if not _TOKEN.match(value):
        raise InvalidSubjectToken(
            f"{value!r} is not a valid subject token (letters, digits, '-', '_')"
        )
    return value


def forecasts(region: str) -> str:
    return f"metatune.forecasts.{token(region)}"


def assignments(datacenter: str) -> str:
    return f"metatune.assignments.{token(datacenter)}"


def agent_status(datacenter: str) -> str:
    return f"metatune.agents.{token(datacenter)}.status"


def run_progress(job_id: UUID | str) -> str:
    return f"metatune.runs.{token(str(job_id))}.progress"


def errors(service: str) -> str:
    return f"metatune.errors.{token(service)}"
