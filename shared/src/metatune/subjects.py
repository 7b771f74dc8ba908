"""Every NATS subject MetaTune uses, in one place.

Subjects with a variable token (a region, a datacenter, a job, a service) are built by the
functions below so no service ever formats a subject string itself.
"""

from __future__ import annotations

import re
from uuid import UUID

from .errors import MetaTuneError
from .tenancy import DEFAULT_TENANT

PREFIX = "metatune"

# What a tenant publishes carries the tenant's name as its last token, so the server's per-user
# permissions keep one tenant from speaking for another (metatune.tenancy); each service follows
# the whole family (the *_ALL filters) and checks the payload's tenant against the subject's.
DATASETS_SUBMITTED_ALL = "metatune.datasets.submitted.*"
JOBS_CANCELLED_ALL = "metatune.jobs.cancelled.*"
STUDIES_CANCELLED_ALL = "metatune.studies.cancelled.*"

DATASETS_PROFILED = "metatune.datasets.profiled"
JOBS_REQUESTED = "metatune.jobs.requested"
JOBS_INFEASIBLE = "metatune.jobs.infeasible"
STUDIES_STOPPED = "metatune.studies.stopped"
PLANS = "metatune.plans"
CLOCK_TICK = "metatune.clock.tick"

# Request/reply (core NATS, answered on the requester's inbox). Kept outside the event stream's
# subjects: JetStream would store a request on ``metatune.jobs.>`` and answer it with its ack.
JOBS_LOOKUP_ALL = "metatune.requests.jobs.lookup.*"
DATASETS_VALIDATE_ALL = "metatune.requests.datasets.validate.*"
KNOWLEDGE_RUNS = "metatune.requests.knowledge.runs"
KNOWLEDGE_EVIDENCE = "metatune.requests.knowledge.evidence"

# Wildcards for consumers that follow a whole family.
FORECASTS_ALL = "metatune.forecasts.*"
ASSIGNMENTS_ALL = "metatune.assignments.*"
AGENTS_STATUS_ALL = "metatune.agents.*.status"
# Run events carry the agent's datacenter as their third token, so the server's per-user
# permissions (metatune.runs.<dc>.>) keep one datacenter from speaking for another.
RUNS_COMPLETED_ALL = "metatune.runs.*.completed"
RUNS_FAILED_ALL = "metatune.runs.*.failed"
RUNS_PAUSED_ALL = "metatune.runs.*.paused"
RUNS_PROGRESS_ALL = "metatune.runs.*.*.progress"
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


class InvalidSubjectToken(MetaTuneError, ValueError):
    """A region, datacenter or service name that cannot be a NATS subject token."""


def token(value: str) -> str:
    """Check that ``value`` is a single safe subject token (no dots, spaces or wildcards)."""
    if not _TOKEN.match(value):
        raise InvalidSubjectToken(
            f"{value!r} is not a valid subject token (letters, digits, '-', '_')"
        )
    return value


def _tenant(family: str, tenant: str) -> str:
    return f"{family.removesuffix('.*')}.{token(tenant)}"


def datasets_submitted(tenant: str = DEFAULT_TENANT) -> str:
    return _tenant(DATASETS_SUBMITTED_ALL, tenant)


def jobs_cancelled(tenant: str = DEFAULT_TENANT) -> str:
    return _tenant(JOBS_CANCELLED_ALL, tenant)


def studies_cancelled(tenant: str = DEFAULT_TENANT) -> str:
    return _tenant(STUDIES_CANCELLED_ALL, tenant)


def jobs_lookup(tenant: str = DEFAULT_TENANT) -> str:
    return _tenant(JOBS_LOOKUP_ALL, tenant)


def datasets_validate(tenant: str = DEFAULT_TENANT) -> str:
    return _tenant(DATASETS_VALIDATE_ALL, tenant)


TENANT_FAMILIES = (DATASETS_SUBMITTED_ALL, JOBS_CANCELLED_ALL, STUDIES_CANCELLED_ALL)


def every_tenant(subject_filter: str) -> str:
    """A filter naming a tenant family without its tenant (``metatune.datasets.submitted``, as
    subjects read before tenants) widened to every tenant's; any other filter as it is."""
    widened = f"{subject_filter}.*"
    return widened if widened in TENANT_FAMILIES else subject_filter


def tenant_of(subject: str) -> str:
    """The tenant a tenant's subject (``metatune.datasets.submitted.<tenant>``...) names."""
    return subject.rsplit(".", 1)[-1]


# the default tenant's (external systems and tools that predate tenants publish these)
DATASETS_SUBMITTED = datasets_submitted()
JOBS_CANCELLED = jobs_cancelled()
STUDIES_CANCELLED = studies_cancelled()
JOBS_LOOKUP = jobs_lookup()
DATASETS_VALIDATE = datasets_validate()


def forecasts(region: str) -> str:
    return f"metatune.forecasts.{token(region)}"


def assignments(datacenter: str) -> str:
    return f"metatune.assignments.{token(datacenter)}"


def agent_status(datacenter: str) -> str:
    return f"metatune.agents.{token(datacenter)}.status"


def runs(datacenter: str) -> str:
    """Every run event of one datacenter (what its agent may publish)."""
    return f"metatune.runs.{token(datacenter)}.>"


def runs_completed(datacenter: str) -> str:
    return f"metatune.runs.{token(datacenter)}.completed"


def runs_failed(datacenter: str) -> str:
    return f"metatune.runs.{token(datacenter)}.failed"


def runs_paused(datacenter: str) -> str:
    return f"metatune.runs.{token(datacenter)}.paused"


def run_progress(datacenter: str, job_id: UUID | str) -> str:
    return f"metatune.runs.{token(datacenter)}.{token(str(job_id))}.progress"


_RUN_EVENT = re.compile(
    r"^metatune\.runs\.([A-Za-z0-9_-]+)\.(?:completed|failed|paused|[A-Za-z0-9_-]+\.progress)$"
)


def run_event_datacenter(subject: str) -> str | None:
    """The datacenter a run-event subject names (None: not a run-event subject)."""
    found = _RUN_EVENT.match(subject)
    return found.group(1) if found else None


def errors(service: str) -> str:
    return f"metatune.errors.{token(service)}"
