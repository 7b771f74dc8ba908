"""``/metrics``: the platform's state in the Prometheus text format, read from telemetry's own
tables at each scrape (nothing is counted in memory, so every replica answers the same):

* ``metatune_telemetry_ingestion_lag_seconds``: the largest stored-minus-occurred time of the
  events stored in the last 5 minutes (forecasts, issued ahead, left out); absent when none was;
  ``metatune_telemetry_events_stored_recent``: how many were stored;
* ``metatune_webhook_outbox_depth{state}`` (``pending``, ``sending``),
  ``metatune_webhook_outbox_oldest_age_seconds`` (0: nothing waiting) and
  ``metatune_webhook_failures{kind}`` (``retrying``: failed, to be retried; ``dead``: given up);
* the latest plan telemetry stored (absent before the first): ``metatune_plan_version``,
  ``_solve_seconds`` (the MILP's), ``_jobs`` (placed), ``_infeasible_jobs``,
  ``_expected_emissions_grams``, ``_baseline_emissions_grams`` (run now),
  ``_timestamp_seconds``;
* ``metatune_agent_up{datacenter}`` (1 when its status was stored within 3 status intervals,
  ``agent_status_interval_s``; every datacenter of the registry is listed),
  ``metatune_agents_alive``, and from each live agent's latest status
  ``metatune_gpus_total{datacenter}`` and ``metatune_gpus_busy{datacenter}``;
* ``metatune_jobs{state}``: requested, running, paused, stopped, cancelled, completed,
  early_stopped, failed.

Liveness is judged by when telemetry *stored* a status (database time), not by the event's own
time, so it holds under a simulated clock. Each app has its own ``CollectorRegistry``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from metatune.registry import Registry

from ...adapters.db import Database

RECENT = "interval '5 minutes'"
INGESTION = f"""
SELECT max(extract(epoch FROM stored_at - occurred_at)) AS lag_s, count(*) AS stored
FROM event_log WHERE stored_at > now() - {RECENT} AND subject NOT LIKE 'metatune.forecasts.%%'
"""
OUTBOX = """
SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'sending') AS sending,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       count(*) FILTER (WHERE state IN ('pending', 'sending') AND attempts > 0) AS retrying,
       coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE state IN ('pending', 'sending'))), 0)
           AS oldest_s
FROM webhook_outbox WHERE state <> 'delivered'
"""
LATEST_PLAN = """
SELECT p.plan_version, p.solve_seconds, p.expected_emissions_g, p.baseline_emissions_g,
       cardinality(p.infeasible_jobs) AS infeasible, extract(epoch FROM p.occurred_at) AS at,
       (SELECT count(DISTINCT e.job_id) FROM plan_entries e WHERE e.event_id = p.event_id) AS jobs
FROM plans p ORDER BY p.plan_version DESC, p.occurred_at DESC LIMIT 1
"""
# the latest status each agent published within the window, by when telemetry stored it
AGENTS = """
SELECT DISTINCT ON (payload->>'datacenter') payload->>'datacenter' AS datacenter,
       (payload->>'gpus_total')::integer AS gpus_total, (payload->>'gpus_free')::integer AS gpus_free
FROM event_log
WHERE stored_at > now() - make_interval(secs => %(window_s)s) AND subject LIKE 'metatune.agents.%%.status'
ORDER BY payload->>'datacenter', stored_at DESC, occurred_at DESC
"""
JOB_STATES = (
    "requested",
    "running",
    "paused",
    "stopped",
    "cancelled",
    "completed",
    "early_stopped",
    "failed",
)
JOBS = """
WITH jobs AS (SELECT job_id FROM job_requests UNION SELECT job_id FROM run_results
              UNION SELECT job_id FROM assignments),
     latest AS (SELECT DISTINCT ON (job_id) job_id, action FROM assignments ORDER BY job_id, occurred_at DESC)
SELECT CASE WHEN r.status = 'completed' AND r.early_stopped THEN 'early_stopped'
            WHEN r.status IS NOT NULL THEN r.status
            WHEN c.job_id IS NOT NULL THEN 'cancelled'
            WHEN l.action IN ('start', 'resume') THEN 'running'
            WHEN l.action = 'pause' THEN 'paused'
            WHEN l.action = 'stop' THEN 'stopped'
            ELSE 'requested' END AS state, count(*) AS n
FROM jobs j LEFT JOIN run_results r USING (job_id) LEFT JOIN job_cancellations c USING (job_id)
     LEFT JOIN latest l USING (job_id)
GROUP BY 1
"""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one scrape read."""

    ingestion: dict[str, Any]
    outbox: dict[str, Any]
    plan: dict[str, Any] | None
    agents: dict[str, tuple[int, int]]  # datacenter up: (gpus_total, gpus_free)
    datacenters: list[str]  # the registry's and every one up
    jobs: dict[str, int] = field(default_factory=dict)


async def read_snapshot(db: Database, status_interval_s: float, registry: Registry) -> Snapshot:
    agents = {
        r["datacenter"]: (r["gpus_total"], r["gpus_free"])
        for r in await db.fetch_dicts(AGENTS, {"window_s": 3 * status_interval_s})
    }
    known = registry.names()
    plans = await db.fetch_dicts(LATEST_PLAN)
    return Snapshot(
        ingestion=(await db.fetch_dicts(INGESTION))[0],
        outbox=(await db.fetch_dicts(OUTBOX))[0],
        plan=plans[0] if plans else None,
        agents=agents,
        datacenters=sorted(set(known) | set(agents)),
        jobs={r["state"]: r["n"] for r in await db.fetch_dicts(JOBS)},
    )


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _labelled(name: str, doc: str, label: str, values: dict[str, float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=[label])
    for key, value in values.items():
        family.add_metric([key], value)
    return family


def families(s: Snapshot) -> Iterator[Metric]:
    """The metric families of one snapshot (see the module's table)."""
    if s.ingestion["lag_s"] is not None:
        yield _gauge(
            "metatune_telemetry_ingestion_lag_seconds",
            "Largest stored-minus-occurred time of the events stored in the last 5 minutes",
            float(s.ingestion["lag_s"]),
        )
    yield _gauge(
        "metatune_telemetry_events_stored_recent",
        "Events stored in the last 5 minutes (forecasts left out)",
        float(s.ingestion["stored"]),
    )
    o = s.outbox
    yield _labelled(
        "metatune_webhook_outbox_depth",
        "Webhook notifications waiting in the outbox",
        "state",
        {"pending": o["pending"], "sending": o["sending"]},
    )
    yield _gauge(
        "metatune_webhook_outbox_oldest_age_seconds",
        "Age of the oldest notification waiting (0: none)",
        float(o["oldest_s"]),
    )
    yield _labelled(
        "metatune_webhook_failures",
        "Notifications that failed: retrying (attempted, to be retried) or dead (given up)",
        "kind",
        {"retrying": o["retrying"], "dead": o["dead"]},
    )
    if (p := s.plan) is not None:
        for name, doc, value in (
            ("plan_version", "Version of the latest plan", p["plan_version"]),
            ("plan_solve_seconds", "MILP solve time of the latest plan", p["solve_seconds"]),
            ("plan_jobs", "Jobs the latest plan places", p["jobs"]),
            ("plan_infeasible_jobs", "Jobs the latest plan could not place", p["infeasible"]),
            (
                "plan_expected_emissions_grams",
                "Expected emissions of the latest plan (gCO2eq)",
                p["expected_emissions_g"],
            ),
            (
                "plan_baseline_emissions_grams",
                "Emissions of running every planned job now (gCO2eq)",
                p["baseline_emissions_g"],
            ),
            ("plan_timestamp_seconds", "When the latest plan was made (Unix time)", p["at"]),
        ):
            yield _gauge(f"metatune_{name}", doc, float(value))
    yield _labelled(
        "metatune_agent_up",
        "1 when the datacenter's agent reported within 3 status intervals",
        "datacenter",
        {dc: 1.0 if dc in s.agents else 0.0 for dc in s.datacenters},
    )
    yield _gauge("metatune_agents_alive", "Agents up", float(len(s.agents)))
    yield _labelled(
        "metatune_gpus_total",
        "GPUs of each agent up",
        "datacenter",
        {dc: total for dc, (total, _) in s.agents.items()},
    )
    yield _labelled(
        "metatune_gpus_busy",
        "GPUs in use at each agent up",
        "datacenter",
        {dc: total - free for dc, (total, free) in s.agents.items()},
    )
    yield _labelled(
        "metatune_jobs",
        "Jobs by state",
        "state",
        {state: s.jobs.get(state, 0) for state in JOB_STATES},
    )


class _Latest(Collector):
    """Yields the snapshot the scrape just read (set and rendered with no await in between)."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[Metric]:
        if self.snapshot is not None:
            yield from families(self.snapshot)

    def describe(self) -> list[Metric]:
        return []  # nothing is read at registration


class MetricsEndpoint:
    """The app's own registry; :meth:`render` reads the tables and returns the exposition."""

    def __init__(self, db: Database, status_interval_s: float, registry: Registry) -> None:
        self.db = db
        self.status_interval_s = status_interval_s
        self.datacenters = registry
        self.registry = CollectorRegistry(auto_describe=False)
        self._latest = _Latest()
        self.registry.register(self._latest)

    async def render(self) -> bytes:
        snapshot = await read_snapshot(self.db, self.status_interval_s, self.datacenters)
        self._latest.snapshot = snapshot
        return generate_latest(self.registry)


__all__ = ["JOB_STATES", "MetricsEndpoint", "Snapshot", "families", "read_snapshot"]
