"""Every channel: its subject, contract, ``Nats-Msg-Id`` scheme, and who sends and who receives it.

Senders and receivers are what the services' ``app.py`` files publish and consume (the NATS users
of :mod:`metatune.bus.auth` are granted the same; a test checks the two agree).

:func:`contract_for` is the one subject -> contract look-up (every reader of the bus asks it,
then keeps the contracts it follows); :func:`contract` insists on an answer and :func:`parse`
validates a message by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from . import contracts as c
from . import msgids, subjects
from .errors import MetaTuneError
from .tenancy import SUBMITTER  # the default tenant's NATS user (metatune.bus.auth)

UUID_PATTERN = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
HOUR_PATTERN = r"\d{4}-\d{2}-\d{2}T\d{2}:00:00\+00:00"
SEALED_PATTERN = f"[0-9a-f]{{{msgids.SEALED_HEX}}}"  # metatune.msgids.sealed
SERVICES = ("profiler", "recommender", "forecaster", "scheduler", "telemetry", "trainer-agent")


@dataclass(frozen=True)
class MsgId:
    """How a producer derives the ``Nats-Msg-Id`` header (see :mod:`metatune.msgids`)."""

    template: str
    pattern: str
    why: str


def event_id(why: str = "a random UUID per event") -> MsgId:
    return MsgId("<event_id>", f"^{UUID_PATTERN}$", f"the payload's event_id ({why})")


@dataclass(frozen=True)
class Receiver:
    """A service consuming a channel, through these durable consumers (``{datacenter}``: per agent)."""

    service: str
    durables: tuple[str, ...]


@dataclass(frozen=True)
class Channel:
    subject: str
    model: type[c.Event]
    summary: str
    senders: tuple[str, ...]
    receivers: tuple[Receiver, ...]
    msg_id: MsgId

    @property
    def id(self) -> str:
        """Channel id in the document: the subject's fixed tokens (``runs.{job_id}.progress`` -> runs-progress)."""
        return "-".join(t for t in self.subject.split(".")[1:] if not t.startswith("{"))

    @property
    def parameters(self) -> list[str]:
        return [t[1:-1] for t in self.subject.split(".") if t.startswith("{")]


def _r(service: str, *durables: str) -> Receiver:
    return Receiver(service, durables)


LOG = _r("telemetry", "telemetry-log")  # telemetry stores the whole event log
STATUS_LOG = _r("telemetry", "telemetry-status")

CATALOG = [
    Channel(
        "metatune.datasets.submitted.{tenant}",
        c.DatasetSubmitted,
        "A user asks for a study: dataset location, task, base model, deadline, trial budget, residency.",
        (SUBMITTER,),
        (_r("profiler", "profiler"), LOG),
        event_id(),
    ),
    Channel(
        subjects.DATASETS_PROFILED,
        c.DatasetProfiled,
        "NLP meta-features of the submitted dataset.",
        ("profiler",),
        (_r("recommender", "recommender", "recommender-kb-profiles"), LOG),
        MsgId(
            "profiled-<submission event_id>",
            f"^profiled-{UUID_PATTERN}$",
            "one profile per submission: a redelivered submission is profiled again and stored once",
        ),
    ),
    Channel(
        subjects.JOBS_REQUESTED,
        c.JobRequested,
        "One trial to run: LoRA configuration, predicted metric ± std, GPU-hours, power, deadline.",
        ("recommender",),
        (_r("scheduler", "scheduler-jobs"), LOG),
        event_id("uuid5 of the job id: a re-requested trial is stored once"),
    ),
    Channel(
        subjects.JOBS_INFEASIBLE,
        c.JobInfeasible,
        "A job whose deadline cannot be met, with the earliest feasible finish.",
        ("scheduler",),
        (LOG,),
        event_id("uuid5 of the job and its deadline"),
    ),
    Channel(
        "metatune.jobs.cancelled.{tenant}",
        c.JobCancelled,
        "A job withdrawn: the scheduler stops it where it runs and never starts it again.",
        (SUBMITTER,),
        (_r("scheduler", "scheduler-cancelled"), LOG),
        event_id(),
    ),
    Channel(
        "metatune.studies.cancelled.{tenant}",
        c.StudyCancelled,
        "A whole study withdrawn: the recommender requests no more of its trials.",
        (SUBMITTER,),
        (_r("recommender", "recommender-cancelled"), LOG),
        event_id(),
    ),
    Channel(
        subjects.STUDIES_STOPPED,
        c.StudyStopped,
        "The recommender requests no more trials for a study: budget spent, best EI below threshold or cancelled.",
        ("recommender",),
        (LOG,),
        event_id("uuid5 of the study: a study stops once"),
    ),
    Channel(
        "metatune.forecasts.{region}",
        c.CarbonForecast,
        "168 hourly carbon intensities (gCO2eq/kWh) with p10/p90 bands for one grid region.",
        ("forecaster",),
        (
            _r("scheduler", "scheduler-forecasts"),
            _r("trainer-agent", "trainer-agent-{datacenter}-forecasts"),
            LOG,
        ),
        MsgId(
            "forecast-<region>-<hour, ISO 8601>",
            f"^forecast-[A-Za-z0-9_-]+-{HOUR_PATTERN}$",
            "one forecast per region and clock hour",
        ),
    ),
    Channel(
        "metatune.assignments.{datacenter}",
        c.Assignment,
        "Start, pause, resume or stop a job at one datacenter (idempotent).",
        ("scheduler",),
        (_r("trainer-agent", "trainer-agent-{datacenter}"), LOG),
        event_id(
            "uuid5 of job, action, datacenter and stretch start: a re-sent assignment is stored once"
        ),
    ),
    Channel(
        subjects.PLANS,
        c.Plan,
        "The whole plan, its expected emissions and the run-now baseline.",
        ("scheduler",),
        (LOG,),
        event_id("uuid5 of the plan version and its first hour"),
    ),
    Channel(
        "metatune.agents.{datacenter}.status",
        c.AgentStatus,
        "Capacity, free GPUs, device and heartbeat of one datacenter.",
        ("trainer-agent",),
        (
            _r("scheduler", "scheduler-agents"),
            _r("recommender", "recommender-agents"),
            STATUS_LOG,
        ),
        event_id(),
    ),
    Channel(
        "metatune.runs.{datacenter}.{job_id}.progress",
        c.RunProgress,
        "Step, tokens (with padding), loss, energy (Wh), power.",
        ("trainer-agent",),
        (_r("scheduler", "scheduler-progress"), LOG),
        event_id(),
    ),
    Channel(
        "metatune.runs.{datacenter}.completed",
        c.RunCompleted,
        "Final metrics, adapter key, energy and emissions of a run.",
        ("trainer-agent",),
        (
            _r("recommender", "recommender-next-trial", "recommender-kb-completed"),
            _r("scheduler", "scheduler-completed"),
            LOG,
        ),
        MsgId(
            "completed-<datacenter and job_id sealed with the agent's key>",
            f"^completed-{SEALED_PATTERN}$",
            "a job completes once per datacenter (an agent's retries and restarts collapse; "
            "no peer can compute the id first)",
        ),
    ),
    Channel(
        "metatune.runs.{datacenter}.failed",
        c.RunFailed,
        "A run that cannot go on, with a typed reason.",
        ("trainer-agent",),
        (
            _r("recommender", "recommender-next-trial-failed", "recommender-kb-failed"),
            _r("scheduler", "scheduler-failed"),
            LOG,
        ),
        MsgId(
            "failed-<start / resume assignment's event_id sealed with the agent's key>",
            f"^failed-{SEALED_PATTERN}$",
            "one failure per run an assignment began (no peer can compute the id first)",
        ),
    ),
    Channel(
        "metatune.runs.{datacenter}.paused",
        c.RunPaused,
        "A run paused with a checkpoint any datacenter can resume from.",
        ("trainer-agent",),
        (_r("scheduler", "scheduler-paused"), LOG),
        MsgId(
            "paused-<start / resume assignment's event_id sealed with the agent's key>",
            f"^paused-{SEALED_PATTERN}$",
            "one pause per run an assignment began (no peer can compute the id first)",
        ),
    ),
    Channel(
        "metatune.errors.{service}",
        c.ErrorEvent,
        "What was wrong with a message or a request.",
        SERVICES,
        (LOG,),
        event_id(),
    ),
    Channel(
        subjects.CLOCK_TICK,
        c.ClockTick,
        "A new (simulated or real) hour began.",
        SERVICES,
        (_r("forecaster"), _r("scheduler"), STATUS_LOG),
        MsgId(
            "tick-<hour, ISO 8601>",
            f"^tick-{HOUR_PATTERN}$",
            "one tick per hour, however many services publish it",
        ),
    ),
]


class UnknownSubject(MetaTuneError):
    """A subject that no channel of the catalog carries."""


def _matcher(channel: Channel) -> re.Pattern[str]:
    """A channel's subject as a regex: each ``{param}`` is one subject token or a ``*``."""
    fixed = re.escape(channel.subject)
    return re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", r"(?:[A-Za-z0-9_-]+|\\*)", fixed) + "$")


_MATCHERS = [(_matcher(channel), channel.model) for channel in CATALOG]


@lru_cache(maxsize=4096)  # one subject per job and datacenter: a dict look-up, not a dozen regexes
def contract_for(subject: str) -> type[c.Event] | None:
    """The contract of a message on ``subject`` (None: no MetaTune channel carries it).

    ``subject`` is a concrete subject (``metatune.runs.dc-1.completed``) or a NATS filter whose
    ``*`` tokens stand for a channel's variable ones (``metatune.runs.*.completed``)."""
    for pattern, model in _MATCHERS:
        if pattern.match(subject):
            return model
    return None


def contract(subject: str) -> type[c.Event]:
    """:func:`contract_for` a subject the catalog must know: :class:`UnknownSubject` if not."""
    model = contract_for(subject)
    if model is None:
        raise UnknownSubject(f"no MetaTune contract for subject {subject!r}")
    return model


def parse(subject: str, data: bytes | str) -> c.Event:
    """The message ``data`` on ``subject`` as its contract; :class:`UnknownSubject` when the
    catalog has no channel for ``subject``, pydantic's ``ValidationError`` when it is invalid."""
    return contract(subject).model_validate_json(data)
