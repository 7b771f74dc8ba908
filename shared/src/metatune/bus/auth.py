"""Who may publish and subscribe to what on NATS: one principal per service, per datacenter agent,
for external submitters, and an admin.

Least privilege is expressed with nats-server's per-user permissions, so everything a process
does must be spelled as subjects:

* Every delivery and every JetStream API reply comes to the user's own inbox prefix
  (``_INBOX_<public key>.>``, granted in :mod:`metatune.bus.credentials`), so no one can read
  another's replies.
* A durable consumer is granted by stream, durable name *and filter subject*: nats-py creates
  it through ``$JS.API.CONSUMER.CREATE.<stream>.<durable>.<filter>``, which the server checks
  against the consumer's filter, so an agent cannot re-point its consumer at another
  datacenter's assignments. Fetching (``CONSUMER.MSG.NEXT``) and acks are granted per durable.
* KV buckets and object stores are streams (``KV_<b>``, ``OBJ_<b>``): writes are granted by
  subject (a KV key, a bucket), reads by bucket (chunks are read through an ephemeral consumer
  whose API subject names only the stream).
* ``$JS.API.>`` is never granted wholesale: it would let a user create a consumer on any stream
  and read it whole. Stream and account info (metadata only) are granted to every service.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .. import subjects
from ..registry import Registry
from ..tenancy import DEFAULT_TENANT, SUBMITTER, datasets_bucket, submitter_user
from .streams import (
    ADAPTERS_BUCKET,
    ASSIGNMENTS_BUCKET,
    CHECKPOINTS_BUCKET,
    CLOCK_BUCKET,
    FORECASTS_BUCKET,
    HEALTH_BUCKET,
    KV_BUCKETS,
    OBJECT_BUCKETS,
    STUDIES_BUCKET,
)

API = "$JS.API"
Role = Literal["admin", "service", "agent", "submitter"]
ADMIN = "admin"


class Permissions(BaseModel):
    """Subjects a user may publish to and subscribe to (nats-server ``allow`` lists)."""

    model_config = ConfigDict(frozen=True)

    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    # nats-server's ``allow_responses``: publish one reply to each request received (to the
    # requester's inbox, which no allow-list names)
    responses: bool = False

    def __add__(self, other: Permissions) -> Permissions:
        return Permissions(
            publish=_unique(self.publish + other.publish),
            subscribe=_unique(self.subscribe + other.subscribe),
            responses=self.responses or other.responses,
        )


class Principal(BaseModel):
    """A NATS user; ``permissions`` None means everything (the admin)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    role: Role
    permissions: Permissions | None


class Streams(BaseModel):
    """Stream names as configured (``METATUNE_STREAM_NAME`` / ``METATUNE_STATUS_STREAM_NAME``)."""

    events: str = "METATUNE"
    status: str = "METATUNE_STATUS"


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


# ----------------------------------------------------------------------------- building blocks
def publish(*subject: str) -> Permissions:
    """Publishing events into JetStream (the ack comes back to the inbox)."""
    return Permissions(publish=subject)


def respond(*subject: str) -> Permissions:
    """Answer requests on ``subject`` (a queue subscription; each reply to the requester's inbox)."""
    return Permissions(subscribe=subject, responses=True)


def durable(stream: str, name: str, filter_subject: str) -> Permissions:
    """A durable pull consumer of ``filter_subject``: look it up, create it, fetch, ack."""
    return Permissions(
        publish=(
            f"{API}.CONSUMER.INFO.{stream}.{name}",
            f"{API}.CONSUMER.CREATE.{stream}.{name}.{filter_subject}",
            f"{API}.CONSUMER.MSG.NEXT.{stream}.{name}",
            f"$JS.ACK.{stream}.{name}.>",
        )
    )


def whole_stream(stream: str) -> Permissions:
    """Read all of a stream through consumers of any name and filter (ordered replays, ticks)."""
    return Permissions(
        publish=(
            f"{API}.CONSUMER.CREATE.{stream}",
            f"{API}.CONSUMER.CREATE.{stream}.>",
            f"{API}.CONSUMER.INFO.{stream}.*",
            f"{API}.CONSUMER.MSG.NEXT.{stream}.*",
            f"{API}.CONSUMER.DELETE.{stream}.*",
            f"$JS.ACK.{stream}.>",
            # an ordered consumer answers the server's flow-control requests here; without it a
            # download larger than the consumer's pending window (a checkpoint) stalls for good
            f"$JS.FC.{stream}.>",
        )
    )


def _stream_metadata(stream: str) -> Permissions:
    return Permissions(publish=(f"{API}.STREAM.INFO.{stream}",))


def _message_gets(stream: str) -> Permissions:
    """Info on ``stream`` and single-message reads from it, direct or by sequence (a KV get, an
    object's meta looked up by name)."""
    return _stream_metadata(stream) + Permissions(
        publish=(
            f"{API}.STREAM.MSG.GET.{stream}",
            f"{API}.DIRECT.GET.{stream}",
            f"{API}.DIRECT.GET.{stream}.>",
        )
    )


def kv_read(bucket: str) -> Permissions:
    stream = f"KV_{bucket}"
    return _message_gets(stream) + whole_stream(stream)


def kv_write(bucket: str, *keys: str) -> Permissions:
    """Put or delete these keys (``>``: any key)."""
    return Permissions(publish=tuple(f"$KV.{bucket}.{key}" for key in keys))


def object_read(bucket: str) -> Permissions:
    """Look objects up and download them (an ordered consumer on the bucket's chunks)."""
    stream = f"OBJ_{bucket}"
    return _message_gets(stream) + whole_stream(stream)


def object_write(bucket: str) -> Permissions:
    """Upload (chunks and meta) and replace objects (the old chunks are purged).

    A writer also looks objects up by name (``put`` reads the current meta first); NATS cannot
    tell that request from a read by sequence, so a writer can read the bucket's messages one by
    one. Purge takes its filter in the body: a writer may purge the whole bucket."""
    stream = f"OBJ_{bucket}"
    return _message_gets(stream) + Permissions(
        publish=(f"$O.{bucket}.>", f"{API}.STREAM.PURGE.{stream}")
    )


def _layout_metadata(streams: Streams) -> Permissions:
    """Info of every stream and bucket (metadata, no message): a service checks the layout at start."""
    names = [
        streams.events,
        streams.status,
        *(f"KV_{b}" for b in KV_BUCKETS),
        *(f"OBJ_{b}" for b in OBJECT_BUCKETS),
    ]
    return Permissions(
        publish=(f"{API}.INFO", f"{API}.STREAM.NAMES", *(f"{API}.STREAM.INFO.{n}" for n in names))
    )


def _base(health_key: str, streams: Streams) -> Permissions:
    """What every service process needs: layout metadata, the clock, its heartbeat, hourly ticks
    (read through an ephemeral consumer on the status stream, published de-duplicated)."""
    return (
        _layout_metadata(streams)
        + kv_read(CLOCK_BUCKET)
        + kv_read(HEALTH_BUCKET)
        + kv_write(HEALTH_BUCKET, health_key, f"{health_key}.>")
        + whole_stream(streams.status)
        + publish(subjects.CLOCK_TICK)
    )


# ----------------------------------------------------------------------------- the principals
def _service(name: str, grants: Permissions, streams: Streams) -> Principal:
    perms = _base(name, streams) + publish(subjects.errors(name)) + grants
    return Principal(name=name, role="service", permissions=perms)


def _datasets_read(tenants: Iterable[str]) -> Permissions:
    """Every tenant's dataset bucket, read (the profiler and the agents)."""
    grants = Permissions()
    for tenant in _with_default(tenants):
        grants = grants + object_read(datasets_bucket(tenant))
    return grants


def _with_default(tenants: Iterable[str]) -> list[str]:
    return [DEFAULT_TENANT, *(t for t in dict.fromkeys(tenants) if t != DEFAULT_TENANT)]


def core_services(streams: Streams, tenants: Iterable[str] = ()) -> list[Principal]:
    ev, st = streams.events, streams.status
    return [
        _service(
            "profiler",
            durable(ev, "profiler", subjects.DATASETS_SUBMITTED_ALL)
            + publish(subjects.DATASETS_PROFILED)
            + respond(subjects.DATASETS_VALIDATE_ALL)  # a submission checked before it is published
            + _datasets_read(tenants),
            streams,
        ),
        _service(
            "recommender",
            durable(ev, "recommender", subjects.DATASETS_PROFILED)
            + durable(ev, "recommender-kb-profiles", subjects.DATASETS_PROFILED)
            + durable(ev, "recommender-next-trial", subjects.RUNS_COMPLETED_ALL)
            + durable(ev, "recommender-kb-completed", subjects.RUNS_COMPLETED_ALL)
            + durable(ev, "recommender-next-trial-failed", subjects.RUNS_FAILED_ALL)
            + durable(ev, "recommender-kb-failed", subjects.RUNS_FAILED_ALL)
            + durable(ev, "recommender-cancelled", subjects.STUDIES_CANCELLED_ALL)
            + durable(st, "recommender-agents", subjects.AGENTS_STATUS_ALL)  # devices to price
            + publish(subjects.JOBS_REQUESTED, subjects.STUDIES_STOPPED)
            + respond(subjects.KNOWLEDGE_RUNS)  # runs of a study in its knowledge base (the demo)
            + respond(subjects.KNOWLEDGE_EVIDENCE)  # the datasets nearest a study's (the demo)
            + kv_read(STUDIES_BUCKET)
            + kv_read(ASSIGNMENTS_BUCKET)  # where each job runs: run events from elsewhere refused
            + kv_write(STUDIES_BUCKET, ">"),
            streams,
        ),
        _service(
            "forecaster",
            publish(subjects.FORECASTS_ALL)
            + kv_read(FORECASTS_BUCKET)  # its last good forecast per region, across restarts
            + kv_write(FORECASTS_BUCKET, ">"),
            streams,
        ),
        _service(
            "scheduler",
            durable(ev, "scheduler-jobs", subjects.JOBS_REQUESTED)
            + durable(ev, "scheduler-cancelled", subjects.JOBS_CANCELLED_ALL)
            + durable(ev, "scheduler-forecasts", subjects.FORECASTS_ALL)
            + durable(ev, "scheduler-progress", subjects.RUNS_PROGRESS_ALL)
            + durable(ev, "scheduler-paused", subjects.RUNS_PAUSED_ALL)
            + durable(ev, "scheduler-completed", subjects.RUNS_COMPLETED_ALL)
            + durable(ev, "scheduler-failed", subjects.RUNS_FAILED_ALL)
            + durable(st, "scheduler-agents", subjects.AGENTS_STATUS_ALL)
            + whole_stream(ev)  # its state is rebuilt by replaying the event log
            + publish(subjects.ASSIGNMENTS_ALL, subjects.PLANS, subjects.JOBS_INFEASIBLE)
            + kv_read(ASSIGNMENTS_BUCKET)
            + kv_write(ASSIGNMENTS_BUCKET, ">")
            + respond(subjects.JOBS_LOOKUP_ALL),  # where a job stands, for a cancel to check first
            streams,
        ),
        # reads everything, publishes its errors only; reads adapters for the MLflow export
        _service("telemetry", whole_stream(ev) + object_read(ADAPTERS_BUCKET), streams),
    ]


def agent_user(datacenter: str) -> str:
    return f"trainer-agent.{subjects.token(datacenter)}"


def agent(datacenter: str, region: str, streams: Streams, tenants: Iterable[str] = ()) -> Principal:
    """The trainer-agent of one datacenter: its assignments and its region's forecasts in; its own
    status, its own datacenter's run events (``metatune.runs.<dc>.>``) and errors out; datasets
    read, checkpoints read and written, adapters written."""
    user = agent_user(datacenter)
    durable_name = f"trainer-agent-{datacenter}"
    perms = (
        _base(user, streams)
        + durable(streams.events, durable_name, subjects.assignments(datacenter))
        + durable(streams.events, f"{durable_name}-forecasts", subjects.forecasts(region))
        + publish(
            subjects.agent_status(datacenter),
            subjects.runs(datacenter),
            subjects.errors("trainer-agent"),
        )
        + kv_read(ASSIGNMENTS_BUCKET)
        + kv_read(STUDIES_BUCKET)
        + kv_read(FORECASTS_BUCKET)  # its region's last forecast, read on start
        + _datasets_read(tenants)
        + object_read(CHECKPOINTS_BUCKET)
        + object_write(CHECKPOINTS_BUCKET)
        + object_write(ADAPTERS_BUCKET)
    )
    return Principal(name=user, role="agent", permissions=perms)


def submitter(streams: Streams, tenant: str = DEFAULT_TENANT) -> Principal:
    """A tenant's external systems and ``metatune submit`` / ``cancel``: upload a dataset to the
    tenant's own bucket (made on first use; no other credential writes it), request, cancel; ask
    the profiler to check a submission and the scheduler where a job stands (the answers come to
    its own inbox: it reads no subject)."""
    bucket = datasets_bucket(tenant)
    perms = (
        Permissions(publish=(f"{API}.INFO", f"{API}.STREAM.NAMES"))
        + _stream_metadata(streams.events)
        + kv_read(CLOCK_BUCKET)
        + publish(
            subjects.datasets_submitted(tenant),
            subjects.jobs_cancelled(tenant),
            subjects.studies_cancelled(tenant),
        )
        + publish(subjects.datasets_validate(tenant), subjects.jobs_lookup(tenant))
        + object_write(bucket)
        + publish(f"{API}.STREAM.CREATE.OBJ_{bucket}")  # its bucket, made by its first upload
    )
    return Principal(name=submitter_user(tenant), role="submitter", permissions=perms)


def principals(
    registry: Registry, streams: Streams | None = None, tenants: Iterable[str] = ()
) -> list[Principal]:
    """Every NATS user of a deployment: admin, the core services, one agent per datacenter of
    ``registry`` (the deployment's: ``Settings.registry()``), one submitter per tenant (the
    default tenant's, and each of ``tenants``: :func:`metatune.bus.credentials.tenants_in`)."""
    streams = streams or Streams()
    tenants = _with_default(tenants)
    agents = [agent(dc.name, dc.region, streams, tenants) for dc in registry.datacenters]
    return [
        Principal(name=ADMIN, role="admin", permissions=None),
        *core_services(streams, tenants),
        *agents,
        *(submitter(streams, tenant) for tenant in tenants),
    ]


__all__ = [
    "ADMIN",
    "SUBMITTER",
    "Permissions",
    "Principal",
    "Streams",
    "agent",
    "agent_user",
    "principals",
]
