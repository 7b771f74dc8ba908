"""The namespace of the scheduler's deterministic event ids (uuid5): a re-sent output keeps its id."""

from uuid import NAMESPACE_URL, uuid5

NAMESPACE = uuid5(NAMESPACE_URL, "https://metatune/scheduler")
