"""The flywheel: every run the platform finishes becomes a knowledge-base row.

The recommender owns the knowledge base (it is the service that learns from it); other services
reach it only through the bus (the tools ask how many runs of a study it holds on
``metatune.requests.knowledge.runs``): the profiler's ``metatune.datasets.profiled``, the agents'
``metatune.runs.<dc>.completed`` / ``.failed`` (from the job's datacenter only: a run event from
anywhere else is a ``foreign_run_event`` error and no row; a completion whose dataset digest is not
the profiled one is a ``dataset_digest_mismatch`` error and no row, and a run that failed on a
swapped dataset is no row either), and the study's best result so far, written back to the
KV bucket ``metatune_studies`` for the agents' learning-curve early stop.

Wiring (in the recommender's ``create_service``)::

    store = KnowledgeStore(settings.database_url, connect_timeout_s=settings.connect_timeout_s)
    register_flywheel(service, store)  # migrates the store at start-up
    service.app.on_startup(partial(load_seeds, store))  # the shipped seeds, idempotently
    service.app.on_shutdown(store.close)

Each consumer is durable with explicit acks (``Service.consume``): a handler that fails (the
database is down) is retried, and a redelivered event writes nothing twice (rows are keyed by job
id, profiles by study id).
"""

from __future__ import annotations

import logging
from pathlib import Path
from uuid import UUID

from faststream.nats.annotations import NatsMessage

from metatune import subjects
from metatune.bus import STUDIES_BUCKET
from metatune.contracts import (
    DatasetProfiled,
    FailureReason,
    KnowledgeRuns,
    KnowledgeRunsReply,
    RunCompleted,
    RunFailed,
)
from metatune.integrity import same_dataset
from metatune.knowledge.errors import KnowledgeBaseError
from metatune.knowledge.store import ImportReport, KnowledgeStore
from metatune.service import Service

from ..domain.kb_rows import completed_run, failed_run, study_best
from .run_gate import accepted
from .seeds import seed_path, seed_paths

log = logging.getLogger("metatune.recommender.flywheel")

DURABLE_PROFILES = "recommender-kb-profiles"
DURABLE_COMPLETED = "recommender-kb-completed"
DURABLE_FAILED = "recommender-kb-failed"


async def load_seed(store: KnowledgeStore, path: Path | None = None) -> ImportReport | None:
    """Import the shipped seed (idempotent: runs already stored are left alone). A seed that cannot
    be read is logged and skipped: the service works without it, on what the store already holds."""
    path = path or seed_path()
    if not path.is_file():
        log.warning("no seed knowledge base at %s", path)
        return None
    try:
        report = await store.import_file(path)
    except KnowledgeBaseError as exc:
        log.error("seed knowledge base not loaded: %s", exc)
        return None
    log.info("seed knowledge base %s: %d runs, %d new", report.name, report.runs, report.added)
    return report


async def load_seeds(store: KnowledgeStore) -> list[ImportReport]:
    """Import every shipped seed (:func:`load_seed` each); those that cannot be read are skipped."""
    reports = [await load_seed(store, path) for path in seed_paths()]
    return [report for report in reports if report is not None]


async def count_runs(store: KnowledgeStore, request: KnowledgeRuns) -> KnowledgeRunsReply:
    """``metatune.requests.knowledge.runs``: how many runs of each study asked the knowledge base
    holds (read only)."""
    counts = await store.study_run_counts(request.study_ids)
    return KnowledgeRunsReply(runs={UUID(study): n for study, n in counts.items()})


def register_flywheel(service: Service, store: KnowledgeStore) -> None:
    """Add the knowledge-base consumers to ``service`` and migrate ``store`` when it starts."""

    async def migrate() -> None:
        applied = await store.migrate()
        if applied:
            log.info("knowledge-base migrations applied: %s", ", ".join(applied))

    service.app.on_startup(migrate)

    async def publish_best(study_id: UUID) -> None:
        best = study_best(study_id, await store.study_runs(study_id))
        if best is None:
            return
        kv = await service.js.key_value(STUDIES_BUCKET)
        await kv.put(str(study_id), best.model_dump_json().encode())

    @service.consume(subjects.DATASETS_PROFILED, durable=DURABLE_PROFILES)
    async def kb_profile(event: DatasetProfiled) -> None:
        """Keep the study's profile; fill its runs that finished before it."""
        filled = await store.save_profile(
            event.study_id, event.spec, event.features, profiled_at=event.occurred_at
        )
        if filled:
            log.info("study %s: profile filled %d earlier run(s)", event.study_id, filled)

    @service.consume(subjects.RUNS_COMPLETED_ALL, durable=DURABLE_COMPLETED)
    async def kb_completed(event: RunCompleted, message: NatsMessage) -> None:
        """One knowledge-base row per job (early-stopped ones flagged); then the study's best to KV."""
        if not await accepted(service, event, message.raw_message.subject, report=True):
            return
        profile = await store.profile(event.study_id)
        if profile and not same_dataset(event.dataset_sha256, profile.spec.dataset.sha256):
            await service.report_error(
                code="dataset_digest_mismatch",
                message=f"job {event.job_id} trained on dataset sha256 {event.dataset_sha256}, "
                f"not the profiled {profile.spec.dataset.sha256}; not in the knowledge base",
                subject=message.raw_message.subject,
                correlation_id=event.job_id,
            )
            return
        run = completed_run(event, profile)
        await store.add_run(run)
        if run.profile_missing:
            await store.fill_from_profile(event.study_id)  # the profile may have landed meanwhile
        await publish_best(event.study_id)

    @service.consume(subjects.RUNS_FAILED_ALL, durable=DURABLE_FAILED)
    async def kb_failed(event: RunFailed, message: NatsMessage) -> None:
        """A failed job is a row too (flagged failed): what did not work is knowledge."""
        if not await accepted(service, event, message.raw_message.subject, report=True):
            return
        if event.reason is FailureReason.dataset_digest_mismatch:  # never trained: no knowledge
            return
        profile = await store.profile(event.study_id) if event.study_id else None
        run = failed_run(event, profile)
        await store.add_run(run)
        if run.profile_missing and event.study_id:
            await store.fill_from_profile(event.study_id)
