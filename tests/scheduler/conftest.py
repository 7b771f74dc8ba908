from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import NAMESPACE_DNS, UUID, uuid5

import numpy as np
import pytest

from metatune.contracts import (
    CarbonForecast,
    DatasetLocation,
    JobRequested,
    LoraConfig,
    RegionGroup,
    StudySpec,
    TaskType,
)
from metatune.embedded import servers
from tests.support.servers import free_port, stop, wait_until_serving

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
