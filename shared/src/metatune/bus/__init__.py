"""Bus plumbing: streams, de-duplicated publish, consumer policy, object store, clock, health."""

from . import forecasts
from .objects import ObjectStore
from .publish import headers_for, publish_event
from .streams import (
    ADAPTERS_BUCKET,
    ASSIGNMENTS_BUCKET,
    CHECKPOINTS_BUCKET,
    DATASETS_BUCKET,
    FORECASTS_BUCKET,
    HEALTH_BUCKET,
    STUDIES_BUCKET,
    ensure_streams,
    stream_for,
)

__all__ = [
    "ADAPTERS_BUCKET",
    "ASSIGNMENTS_BUCKET",
    "CHECKPOINTS_BUCKET",
    "DATASETS_BUCKET",
    "FORECASTS_BUCKET",
    "HEALTH_BUCKET",
    "STUDIES_BUCKET",
    "ObjectStore",
    "ensure_streams",
    "forecasts",
    "headers_for",
    "publish_event",
    "stream_for",
]
