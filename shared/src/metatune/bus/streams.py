"""JetStream layout: two streams, the KV buckets and object stores MetaTune uses.

* ``METATUNE``: the durable event log (file storage, de-duplication window, 30 days).
* ``METATUNE_STATUS``: heartbeats and clock ticks, which only matter while fresh, so each
  subject keeps its last few hundred messages for a day.
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, ObjectStoreConfig, StorageType, StreamConfig
from nats.js.errors import BucketNotFoundError, NotFoundError

from .. import subjects, tenancy
from ..settings import Settings

DAY_S = 24 * 3600.0

HEALTH_BUCKET = "metatune_health"
CLOCK_BUCKET = "metatune_clock"
# Per-study state the recommender owns and agents read. Key <study id>: StudyBest JSON, the best
# result so far, which the learning-curve early stop compares a running trial against. Key
# <study id>.loop: the study loop's state (trials requested, stopped; metatune_recommender.
# adapters.loop_store), so a restarted recommender neither loses nor repeats a trial.
STUDIES_BUCKET = "metatune_studies"
# Each job's latest assignment (key: job id; value: CurrentAssignment JSON), written by the
# scheduler before it publishes the assignment; agents refuse anything older.
ASSIGNMENTS_BUCKET = "metatune_assignments"
# The forecaster's last good (fresh) forecast of each region (key: region; value: CarbonForecast
# JSON), so a forecaster restarted while a provider is down still has a stale one to publish.
FORECASTS_BUCKET = "metatune_forecasts"
DATASETS_BUCKET = tenancy.DATASETS_BUCKET  # the default tenant's (each other's: datasets-<tenant>)
CHECKPOINTS_BUCKET = "checkpoints"
ADAPTERS_BUCKET = "adapters"
OBJECT_BUCKETS = (DATASETS_BUCKET, CHECKPOINTS_BUCKET, ADAPTERS_BUCKET)
KV_BUCKETS = (HEALTH_BUCKET, CLOCK_BUCKET, STUDIES_BUCKET, ASSIGNMENTS_BUCKET, FORECASTS_BUCKET)


def stream_configs(settings: Settings) -> list[StreamConfig]:
    return [
        StreamConfig(
            name=settings.stream_name,
            subjects=subjects.EVENT_STREAM_SUBJECTS,
            storage=StorageType.FILE,
            duplicate_window=settings.dedup_window_s,
            max_age=30 * DAY_S,
            num_replicas=settings.stream_replicas,
        ),
        StreamConfig(
            name=settings.status_stream_name,
            subjects=subjects.STATUS_STREAM_SUBJECTS,
            storage=StorageType.FILE,
            duplicate_window=settings.dedup_window_s,
            max_age=DAY_S,
            max_msgs_per_subject=500,
            num_replicas=settings.stream_replicas,
        ),
    ]


def stream_for(subject: str, settings: Settings) -> str:
    """Name of the stream that captures ``subject``."""
    prefixes = [p.removesuffix(">") for p in subjects.STATUS_STREAM_SUBJECTS]
    if any(subject.startswith(p) for p in prefixes):
        return settings.status_stream_name
    return settings.stream_name


async def ensure_streams(js: JetStreamContext, settings: Settings) -> None:
    """Create or update the streams, KV buckets and object stores; safe to call from every process.

    What already matches is only looked up (stream info), never written: a service with least
    privilege (no stream create / update rights) starts against a layout the admin created."""
    for config in stream_configs(settings):
        assert config.name is not None  # stream_configs names every stream
        try:
            info = await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)
            continue
        if not _same(info.config, config):
            await js.update_stream(config)
    await ensure_kv(js, HEALTH_BUCKET, ttl_s=30.0, settings=settings)
    await ensure_kv(js, CLOCK_BUCKET, ttl_s=None, settings=settings)
    await ensure_kv(js, STUDIES_BUCKET, ttl_s=None, settings=settings)
    await ensure_kv(js, ASSIGNMENTS_BUCKET, ttl_s=None, settings=settings)
    await ensure_kv(js, FORECASTS_BUCKET, ttl_s=None, settings=settings)
    for bucket in OBJECT_BUCKETS:
        await ensure_bucket(js, bucket, settings)


async def ensure_bucket(js: JetStreamContext, bucket: str, settings: Settings) -> None:
    """Create object bucket ``bucket`` unless it exists (a tenant's datasets bucket: by its
    first upload, with the tenant's grant to create that one bucket)."""
    try:
        await js.object_store(bucket)
    except (BucketNotFoundError, NotFoundError):
        await js.create_object_store(
            bucket, ObjectStoreConfig(storage=StorageType.FILE, replicas=settings.stream_replicas)
        )


def _same(current: StreamConfig, wanted: StreamConfig) -> bool:
    fields = ("storage", "num_replicas", "max_msgs_per_subject")
    return (
        sorted(current.subjects or []) == sorted(wanted.subjects or [])
        and all(
            getattr(current, f) == getattr(wanted, f)
            for f in fields
            if getattr(wanted, f) is not None
        )
        and all(
            abs((getattr(current, f) or 0) - getattr(wanted, f)) < 1e-3
            for f in ("duplicate_window", "max_age")
            if getattr(wanted, f) is not None
        )
    )


async def ensure_kv(js: JetStreamContext, bucket: str, ttl_s: float | None, settings: Settings):
    try:
        return await js.key_value(bucket)
    except (BucketNotFoundError, NotFoundError):
        return await js.create_key_value(
            KeyValueConfig(
                bucket=bucket,
                ttl=ttl_s,
                storage=StorageType.FILE,
                replicas=settings.stream_replicas,
            )
        )
