"""Export a study's finished trials to an MLflow tracking server (optional: the ``mlflow`` extra).

What a trial becomes is :mod:`..domain.mlflow_runs`'s; this module reads the study from the
database, fetches each adapter through the function its caller passes in (the object store is
on the bus), and writes through MLflow's public client, imported only when an export runs (so
telemetry works without it). The client blocks, so it runs in a worker thread.

Idempotent: a trial's run is found again by its job-id tag, and a run is tagged complete only
once everything of it is logged; a run an interrupted export left incomplete is deleted and made
again, so exporting a study twice leaves one run per trial. Two exports of one study at once (the
command beside the service, two telemetry replicas) take turns: each holds a PostgreSQL advisory
lock on the study for its whole export, so the second finds the first's runs.

:class:`ExportWorker` is the service's automatic path (``METATUNE_MLFLOW_TRACKING_URI``): it
polls for studies that have ended (the ``study.completed`` state the writer records in
``notify_state``, with or without a webhook), exports each once per process, and schedules a
failed export again with backoff after reporting it; it never touches ingestion.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import tarfile
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field

from metatune import __version__
from metatune.backoff import backoff_s
from metatune.errors import DatabaseUnavailable, MetaTuneError, ObjectNotFound
from metatune.labels import saved_labels, write_labels
from metatune.redaction import redact, redact_url

from ...adapters.db import Database
from ..domain.mlflow_runs import (
    ADAPTER_ARTIFACTS,
    EXPORT_COMPLETE,
    TAG_EXPORT,
    TAG_JOB,
    ArtifactLocationNeeded,
    StepPoint,
    StudyRecord,
    TrialRecord,
    curve_metrics,
    experiment_name,
    experiment_tags,
    final_metrics,
    millis,
    mlflow_status,
    run_name,
    run_params,
    run_tags,
    start_millis,
)
from ..domain.mlflow_runs import artifact_location as artifact_place

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger("metatune.telemetry.mlflow")

INSTALL_HINT = "pip install metatune-telemetry[mlflow]"
TAG_ADAPTER_MISSING = "metatune.adapter_missing"
# MLflow's limits per log_batch call
PARAMS_PER_BATCH, METRICS_PER_BATCH = 100, 1000
POLL_S = 5.0  # how often the worker looks for studies that have ended
RETRY_S, MAX_RETRY_S = 30.0, 3600.0  # a failed export's next try: doubling, capped
EXPORT_LOCK = 1952803943  # advisory lock class of a study's export (with the study's hash)

FetchAdapter = Callable[[str, Path], Awaitable[object]]
"""Writes the adapter object of a key (bucket ``adapters``) to a path; raises
:class:`~metatune.errors.ObjectNotFound` when there is none."""

T = TypeVar("T")


class MlflowExportError(MetaTuneError):
    """The export cannot run (MLflow not installed, the study unknown) or MLflow refused it."""


class ExportSummary(BaseModel):
    """What one export did (``metatune telemetry export-mlflow --json`` prints it)."""

    study_id: UUID
    experiment: str = Field(description="the MLflow experiment's name")
    experiment_id: str
    tracking_uri: str = Field(description="where: the URI as given, credentials masked")
    artifact_location: str | None = Field(
        None, description="where the experiment keeps its runs' artifacts, as MLflow says"
    )
    runs_created: int = Field(description="trials exported now")
    runs_existing: int = Field(description="trials already exported before")
    adapters_missing: list[str] = Field(description="adapter keys not in the object store")


# ----------------------------------------------------------------------------- reading
TRIALS_SQL = (
    "SELECT r.job_id, q.trial_index, coalesce(q.base_model, s.base_model) AS base_model, "
    "s.spec->'dataset'->>'ref' AS dataset, r.status, r.finished_at, r.datacenter, "
    "coalesce(r.config, q.config) AS config, r.metrics, r.energy_wh, "
    "coalesce(r.emissions_g, 0) AS emissions_g, coalesce(r.early_stopped, false) AS early_stopped, "
    "r.stop_reason, r.steps, r.adapter_key "
    "FROM run_results r LEFT JOIN job_requests q USING (job_id) "
    "LEFT JOIN studies s ON s.study_id = %(study)s "
    # a failed run's event may name only its job: the study is then its request's
    "WHERE r.job_id IN (SELECT job_id FROM run_results WHERE study_id = %(study)s "
    "UNION SELECT job_id FROM job_requests WHERE study_id = %(study)s) "
    "ORDER BY q.trial_index NULLS LAST, r.finished_at, r.job_id"
)
STUDY_SQL = (
    "SELECT (SELECT spec->>'name' FROM studies WHERE study_id = %(study)s), "
    "EXISTS (SELECT 1 FROM studies WHERE study_id = %(study)s) "
    "OR EXISTS (SELECT 1 FROM job_requests WHERE study_id = %(study)s)"
)
# where each run trained, in the order it got there (a paused job may resume elsewhere)
SITES_SQL = (
    "SELECT job_id, datacenter FROM run_metrics WHERE job_id = ANY(%s) "
    "GROUP BY job_id, datacenter ORDER BY job_id, min(time)"
)
POINTS_SQL = (
    "SELECT step, time, train_loss, val_loss, learning_rate FROM run_metrics "
    "WHERE job_id = %s ORDER BY time, step"
)
# the studies that have ended: the writer records the study.completed state of each, whether or
# not it has a webhook to notify (adapters/completion.py)
ENDED_SQL = (
    "SELECT substr(entity_id, 7)::uuid FROM notify_state "
    "WHERE entity_id LIKE 'study:%%' AND state = 'completed' ORDER BY changed_at"
)


async def study_trials(db: Database, study_id: UUID) -> StudyRecord:
    """The study and its trials whose run finished, without their curves (:func:`trial_points`)."""
    [(name, known)] = await db.fetch(STUDY_SQL, {"study": study_id})
    if not known:
        raise MlflowExportError(f"no study {study_id} in telemetry")
    rows = await db.fetch_dicts(TRIALS_SQL, {"study": study_id})
    sites: dict[UUID, list[str]] = {}
    for job, datacenter in await db.fetch(SITES_SQL, ([r["job_id"] for r in rows],)):
        sites.setdefault(job, []).append(datacenter)
    trials = []
    for r in rows:
        where = sites.get(r["job_id"], [])
        trials.append(
            TrialRecord(
                job_id=r["job_id"],
                trial_index=r["trial_index"],
                status=r["status"],
                finished_at=r["finished_at"],
                base_model=r["base_model"],
                dataset=redact(r["dataset"]) if r["dataset"] else None,
                datacenters=where if r["datacenter"] in where else [*where, r["datacenter"]],
                config=r["config"],
                metrics=r["metrics"],
                energy_wh=r["energy_wh"],
                emissions_g=r["emissions_g"],
                early_stopped=r["early_stopped"],
                stop_reason=r["stop_reason"],
                steps=r["steps"],
                adapter_key=r["adapter_key"],
            )
        )
    return StudyRecord(study_id=study_id, name=name, trials=trials)


async def trial_points(db: Database, job_id: UUID) -> tuple[StepPoint, ...]:
    rows = await db.fetch(POINTS_SQL, (job_id,))
    return tuple(
        StepPoint(step, at, {"train_loss": train, "val_loss": val, "learning_rate": lr})
        for step, at, train, val, lr in rows
    )


async def ended_studies(db: Database) -> list[UUID]:
    return [row[0] for row in await db.fetch(ENDED_SQL)]


# ----------------------------------------------------------------------------- MLflow (blocking)
def connect(tracking_uri: str) -> MlflowClient:
    """MLflow's client for ``tracking_uri``; a clear error when the extra is not installed.
    MLflow's "View run ... at" lines on stdout (a server's runs) are turned off unless the user
    set ``MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT``: stdout is the command's (``--json``)."""
    try:
        from mlflow import MlflowClient
    except ImportError as exc:
        raise MlflowExportError(f"the MLflow export needs MLflow: {INSTALL_HINT} ({exc})") from None
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    with refused(tracking_uri):
        return MlflowClient(tracking_uri=tracking_uri)


@contextmanager
def refused(tracking_uri: str) -> Iterator[None]:
    """What MLflow (or the network under it) raises, as one :class:`MlflowExportError` line
    naming the store without credentials."""
    try:
        yield
    except MetaTuneError:
        raise
    except Exception as exc:
        from mlflow.exceptions import MlflowException

        if not isinstance(exc, MlflowException | OSError):
            raise
        text = " ".join(redact(str(getattr(exc, "message", exc))).split())
        raise MlflowExportError(f"MLflow at {redact_url(tracking_uri)}: {text}") from exc


def experiment_of(client: MlflowClient, study: StudyRecord, location: str | None = None) -> str:
    """The study's experiment id, made (or restored from MLflow's bin) where needed; a new one
    keeps its artifacts at ``location`` (None: where the tracking store decides)."""
    from mlflow.exceptions import MlflowException

    name = experiment_name(study.study_id, study.name)
    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return str(
                client.create_experiment(
                    name, artifact_location=location, tags=experiment_tags(study)
                )
            )
        except MlflowException:  # made meanwhile by another exporter
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    if found.lifecycle_stage == "deleted":
        client.restore_experiment(found.experiment_id)
    return str(found.experiment_id)


def exported_runs(client: MlflowClient, experiment_id: str) -> set[UUID]:
    """The jobs whose run is there complete; runs an interrupted export left are deleted."""
    complete: set[UUID] = set()
    token: str | None = None
    while True:  # bounded: each page is one the server returns, the last has no token
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        for run in page:
            job = run.data.tags.get(TAG_JOB)
            if job is None:
                continue  # someone else's run in the experiment
            if run.data.tags.get(TAG_EXPORT) == EXPORT_COMPLETE:
                complete.add(UUID(job))
            else:
                client.delete_run(run.info.run_id)
        token = page.token
        if not token:
            return complete


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def log_run(
    client: MlflowClient,
    experiment_id: str,
    study: StudyRecord,
    trial: TrialRecord,
    adapter: Path | None,
) -> str:
    """One trial as one run: tags, parameters, curve and final metrics, the adapter's files;
    marked complete last. Returns the run id."""
    from mlflow.entities import Metric, Param

    tags = run_tags(trial, study, __version__)
    if trial.adapter_key and adapter is None:
        tags[TAG_ADAPTER_MISSING] = "not in the object store"
    run = client.create_run(
        experiment_id, start_time=start_millis(trial), tags=tags, run_name=run_name(trial)
    )
    run_id = run.info.run_id
    params = [Param(k, v) for k, v in run_params(trial).items()]
    for chunk in _chunks(params, PARAMS_PER_BATCH):
        client.log_batch(run_id, params=list(chunk))
    metrics = [
        Metric(m.key, m.value, m.timestamp_ms, m.step)
        for m in curve_metrics(trial) + final_metrics(trial)
    ]
    for batch in _chunks(metrics, METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=list(batch))
    if adapter is not None:
        if adapter.is_dir():
            client.log_artifacts(run_id, str(adapter), ADAPTER_ARTIFACTS)
        else:
            client.log_artifact(run_id, str(adapter), ADAPTER_ARTIFACTS)
    client.set_terminated(run_id, mlflow_status(trial), end_time=millis(trial.finished_at))
    client.set_tag(run_id, TAG_EXPORT, EXPORT_COMPLETE)
    return str(run_id)


# ----------------------------------------------------------------------------- the export
async def adapter_files(key: str, fetch: FetchAdapter, folder: Path) -> Path | None:
    """The adapter of ``key`` in ``folder``: the PEFT directory its tar holds (a file that is not
    a tar stays as it is); None when the object store has no such adapter."""
    archive = folder / "adapter.tar"
    try:
        await fetch(key, archive)
    except ObjectNotFound:
        return None
    out = folder / ADAPTER_ARTIFACTS
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(out, filter="data")  # no absolute paths, links out or devices
    except tarfile.ReadError:
        return archive
    write_labels(out, saved_labels(out))  # labels.json, as `metatune adapter download` writes it
    return out


@asynccontextmanager
async def exporting(db: Database, study_id: UUID) -> AsyncIterator[None]:
    """One export of ``study_id`` at a time, across processes: a session advisory lock on one
    pooled connection, released when the export ends (or the process, and its connection, dies)."""
    key = (EXPORT_LOCK, str(study_id))
    async with db.connection() as conn:
        await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
        try:
            yield
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)


async def export_study(
    db: Database,
    study_id: UUID,
    tracking_uri: str,
    fetch_adapter: FetchAdapter,
    artifact_location: str | None = None,
) -> ExportSummary:
    """Export every finished trial of ``study_id`` not yet in MLflow at ``tracking_uri`` (passed
    to MLflow as it is); a new experiment keeps its artifacts at ``artifact_location``, else
    beside the tracking store (:func:`..domain.mlflow_runs.artifact_location`)."""
    try:
        location = artifact_place(tracking_uri, study_id, artifact_location, os.getcwd())
    except ArtifactLocationNeeded as exc:
        raise MlflowExportError(f"MLflow at {redact_url(tracking_uri)}: {exc}") from None
    async with exporting(db, study_id):
        return await _export_study(db, study_id, tracking_uri, fetch_adapter, location)


async def _export_study(
    db: Database,
    study_id: UUID,
    tracking_uri: str,
    fetch_adapter: FetchAdapter,
    location: str | None,
) -> ExportSummary:
    study = await study_trials(db, study_id)
    client = await asyncio.to_thread(connect, tracking_uri)
    with refused(tracking_uri):
        experiment_id = await asyncio.to_thread(experiment_of, client, study, location)
        experiment = await asyncio.to_thread(client.get_experiment, experiment_id)
        done = await asyncio.to_thread(exported_runs, client, experiment_id)
    created, missing = 0, []
    for trial in study.trials:
        if trial.job_id in done:
            continue
        trial = replace(trial, points=await trial_points(db, trial.job_id))
        with tempfile.TemporaryDirectory(prefix="metatune-mlflow-") as tmp:
            adapter = None
            if trial.adapter_key:
                adapter = await adapter_files(trial.adapter_key, fetch_adapter, Path(tmp))
                if adapter is None:
                    missing.append(trial.adapter_key)
            with refused(tracking_uri):
                await asyncio.to_thread(log_run, client, experiment_id, study, trial, adapter)
        created += 1
    return ExportSummary(
        study_id=study_id,
        experiment=experiment_name(study_id, study.name),
        experiment_id=experiment_id,
        tracking_uri=redact_url(tracking_uri),
        artifact_location=experiment.artifact_location,
        runs_created=created,
        runs_existing=sum(t.job_id in done for t in study.trials),
        adapters_missing=missing,
    )


class ExportWorker:
    """The service's automatic export: each ended study once, a failed one again later."""

    def __init__(
        self,
        db: Database,
        tracking_uri: str,
        fetch_adapter: FetchAdapter,
        on_failed: Callable[[UUID, Exception], Awaitable[None]],
        *,
        artifact_location: str | None = None,
        poll_s: float = POLL_S,
        retry_s: float = RETRY_S,
        max_retry_s: float = MAX_RETRY_S,
        rng: random.Random | None = None,
    ) -> None:
        self.db = db
        self.tracking_uri = tracking_uri
        self.fetch_adapter = fetch_adapter
        self.artifact_location = artifact_location
        self.on_failed = on_failed
        self.poll_s = poll_s
        self.retry_s, self.max_retry_s = retry_s, max_retry_s
        self.rng = rng or random.Random()
        self.exported: set[UUID] = set()  # by this process
        self.failed: dict[UUID, tuple[int, float]] = {}  # attempts so far, when to try again

    async def run(self) -> None:
        while True:
            try:
                await self.export_ended()
            except DatabaseUnavailable as exc:  # ingestion waits for it too; so do we
                log.warning("MLflow export: %s; trying again", exc)
            await asyncio.sleep(self.poll_s)

    async def export_ended(self) -> int:
        """Export the ended studies not exported yet whose turn it is; returns how many went."""
        loop = asyncio.get_running_loop()
        went = 0
        for study in await ended_studies(self.db):
            attempts, due = self.failed.get(study, (0, 0.0))
            if study in self.exported or due > loop.time():
                continue
            try:
                summary = await export_study(
                    self.db, study, self.tracking_uri, self.fetch_adapter, self.artifact_location
                )
            except DatabaseUnavailable:
                raise
            except Exception as exc:
                attempts += 1
                wait = backoff_s(attempts, self.retry_s, self.max_retry_s, jitter=self.rng)
                self.failed[study] = (attempts, loop.time() + wait)
                log.warning(
                    "MLflow export of study %s failed (again in %.0f s): %s", study, wait, exc
                )
                await self.on_failed(study, exc)
                continue
            self.exported.add(study)
            self.failed.pop(study, None)
            went += 1
            log.info(
                "study %s exported to MLflow experiment %r: %d run(s) new, %d there",
                study,
                summary.experiment,
                summary.runs_created,
                summary.runs_existing,
            )
        return went
