"""A study recorded for the MLflow export's tests (three trials, their curves and adapters), the
stores it is exported to, how the export fetches adapters, and the CLI that exports it."""

from __future__ import annotations

import os
import subprocess
import tarfile
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from metatune import contracts as c
from metatune import subjects
from metatune.bus import ADAPTERS_BUCKET, ObjectStore, ensure_streams
from metatune.settings import Settings
from metatune_telemetry.exports.domain.mlflow_runs import (
    TAG_JOB,
)
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.cli import run
from tests.support.samples import NOW

from .recording import carrying, study

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

ADAPTER = {"adapter_config.json": b'{"r": 4}', "adapter_model.safetensors": b"\x00weights"}
STEPS = 10  # per trial: two progress events of five steps


def recorded_study():
    """``study``'s three trials (two completed, with adapters a0 and a1, the third cancelled and
    its run then stopped, the failure naming only the job), with each completed trial's training
    curve, and the events that end the study."""
    sid, jobs, before, stop, last = study(None)  # no webhook
    curves = [
        (subjects.run_progress("fra1", job), carrying(job, first))
        for job in jobs[:2]
        for first in (1, 6)
    ]
    stopped = c.RunFailed(
        occurred_at=NOW + timedelta(hours=5),
        job_id=jobs[2],
        datacenter="fra1",
        reason=c.FailureReason.stopped,
        message="stopped",
        accounting=c.RunAccounting(energy_wh=100.0, emissions_g=20.0),
    )
    # after the three starts (run events count only from there), before the completions
    events = before[:7] + curves + before[7:] + [stop, last]
    return sid, jobs, [*events, (subjects.runs_failed("fra1"), stopped)]


async def store(db, events) -> None:
    """Through the real writer, as the service's ingestion stores them."""
    result = await EventWriter(db).write(
        [Incoming("METATUNE", i, s, e.to_bytes()) for i, (s, e) in enumerate(events, 1)]
    )
    assert not result.rejected


async def put_adapter(js, tmp_path: Path, key: str, files: dict[str, bytes] = ADAPTER) -> None:
    folder = tmp_path / "adapter-src"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    archive = tmp_path / "adapter.tar"
    with tarfile.open(archive, "w") as tar:
        for name in files:
            tar.add(folder / name, arcname=name)
    await ObjectStore(js).put_file(ADAPTERS_BUCKET, key, archive)


def fetcher(js) -> Callable[[str, Path], Awaitable[None]]:
    """How the export fetches an adapter: from the adapters bucket of ``js``."""

    async def fetch(key: str, path: Path) -> None:
        await ObjectStore(js).get_to_file(ADAPTERS_BUCKET, key, path)

    return fetch


async def recorded(
    db, js, settings: Settings, tmp_path: Path | None = None, files: dict[str, bytes] = ADAPTER
) -> tuple[UUID, list[UUID], Callable[[str, Path], Awaitable[None]]]:
    """:func:`recorded_study` stored through the writer, the streams ensured on ``js`` and, given
    ``tmp_path``, a0's adapter (``files``) in the bucket; the study's id, its jobs' ids and the
    export's :func:`fetcher`."""
    await ensure_streams(js, settings)
    if tmp_path is not None:
        await put_adapter(js, tmp_path, "adapters/a0.tar", files)
    sid, jobs, events = recorded_study()
    await store(db, events)
    return sid, jobs, fetcher(js)


def tracking(uri: str) -> MlflowClient:
    """MLflow's public client (imported here: collecting the tests needs no MLflow)."""
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def runs_by_job(client: MlflowClient, sid: UUID) -> dict[UUID, Run]:
    experiment = client.get_experiment_by_name(f"sst2-sweep ({sid})")
    if experiment is None:
        return {}
    return {UUID(r.data.tags[TAG_JOB]): r for r in client.search_runs([experiment.experiment_id])}


def cli_env(settings: Settings, schema: str) -> dict[str, str]:
    url = settings.database_url
    return {
        **os.environ,
        "METATUNE_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}",
        "METATUNE_NATS_URL": settings.nats_url,
    }


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(["telemetry", "export-mlflow", *args], env)
