from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import NAMESPACE_DNS, UUID, uuid5

import numpy as np
import pytest

from metatune import subjects
from metatune.contracts import (
    CarbonForecast,
    DatasetLocation,
    JobRequested,
    LoraConfig,
    RegionGroup,
    StudySpec,
    TaskType,
)
from metatune_cli.embedded import servers
from metatune_scheduler.domain import Aggregation, HighsModelSolver, Planner, Scheduler, SolveLimits
from tests.support.builders import heartbeat, small_registry
from tests.support.servers import free_port, stop, wait_until_serving
from tests.support.waiting import wait_for

NOW = datetime(2025, 3, 3, 0, tzinfo=UTC)


def job_id(n: int) -> UUID:
    return uuid5(NAMESPACE_DNS, f"job-{n}.metatune")


def job_requested(
    n: int,
    *,
    hours: float,
    gpus: int = 1,
    power_kw: float = 1.0,
    deadline_h: int = 24,
    group: RegionGroup | None = None,
    home: str | None = None,
    at: datetime = NOW,
) -> JobRequested:
    spec = StudySpec(
        dataset=DatasetLocation(kind="path", ref="/data/x.jsonl"),
        task=TaskType.classification,
        base_model="all-minilm-l6-v2",
        label_column="label",
        deadline=at + timedelta(hours=deadline_h),
        region_group=group,
        home_datacenter=home,
    )
    return JobRequested(
        event_id=uuid5(NAMESPACE_DNS, f"request-{n}"),
        occurred_at=at,
        job_id=job_id(n),
        study_id=job_id(1000 + n),
        trial_index=0,
        spec=spec,
        config=LoraConfig(),
        gpus=gpus,
        estimated_gpu_hours=hours * gpus,
        power_kw=power_kw,
        deadline=at + timedelta(hours=deadline_h),
    )


def forecast(region: str, values, start: datetime = NOW) -> CarbonForecast:
    series = np.resize(np.asarray(values, dtype=float), 168).tolist()
    return CarbonForecast(
        event_id=uuid5(NAMESPACE_DNS, f"forecast-{region}-{start.isoformat()}"),
        occurred_at=start,
        region=region,
        issued_at=start,
        start=start,
        model_version="test",
        g_per_kwh=series,
        p10_g_per_kwh=series,
        p90_g_per_kwh=series,
    )


def with_agents(scheduler: Scheduler, *names: str) -> Scheduler:
    """A live agent at each of ``names`` (every datacenter of the registry by default), heard
    offering the registry's GPUs: capacity comes only from live agents."""
    for dc in scheduler.registry.datacenters:
        if not names or dc.name in names:
            scheduler.apply(heartbeat(dc, at=NOW))
    return scheduler


THREE_SITES = small_registry("fra1", "osl1", "sjc1")


def three_site_scheduler() -> Scheduler:
    """A scheduler over fra1, osl1 and sjc1, each agent live: an exact solve (20 s at most) over
    48 hours, hourly for the first day, then 3-hour blocks."""
    return with_agents(
        Scheduler(
            THREE_SITES,
            Planner(
                HighsModelSolver(SolveLimits(time_limit_s=20, mip_rel_gap=0.0)),
                Aggregation(horizon=48, hourly=24, blocks=((48, 3),)),
            ),
        )
    )


async def announce_agents(js: Any, service: Any) -> None:
    """Each datacenter's heartbeat on its status subject, as its agent would send it, until the
    scheduler ``service`` has heard them all: for service tests without agents of their own (with a
    lease longer than the test, none is lost)."""
    scheduler = service.runtime.scheduler
    for dc in scheduler.registry.datacenters:
        await js.publish(subjects.agent_status(dc.name), heartbeat(dc, at=NOW).to_bytes())
    names = {dc.name for dc in scheduler.registry.datacenters}
    await wait_for(lambda: names <= scheduler.live, "the scheduler heard every agent")


@pytest.fixture(scope="module")
def module_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A nats-server of this test module alone, so its streams start empty."""
    directory = tmp_path_factory.mktemp("nats")
    url = f"nats://127.0.0.1:{free_port()}"
    proc: subprocess.Popen[bytes] = servers.start_nats(url, directory, directory)
    try:
        wait_until_serving(url, "the module's nats-server")
        yield url
    finally:
        stop(proc)
