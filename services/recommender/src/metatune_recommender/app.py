"""Recommender service: a profiled dataset becomes job requests; completions bring the next trial by EI.

* ``metatune.datasets.profiled``: the top-min(3, trials) configurations from the GP recommender
  (or the cold-start portfolio, flagged, when the knowledge base cannot answer), each a
  ``metatune.jobs.requested`` with its prediction and cost.
* ``metatune.runs.<dc>.completed`` / ``.failed`` (from the job's datacenter only): while the study's budget (``spec.trials``) is not
  spent, the next trial by Expected Improvement conditioned on the study's finished runs; when the
  budget is spent or the best EI falls below the threshold, one ``metatune.studies.stopped``.

Ids are stable: job = uuid5(study, trial index), the next trial's index = initial batch + finished
runs - 1, so a redelivered event requests nothing twice (same job id, same event id, the stream
de-duplicates). The knowledge base is read through :class:`KnowledgeStore` (the flywheel keeps
it current); the fitted prior is cached per base model and refitted when the base grows.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from faststream.nats.annotations import NatsMessage

from metatune import subjects
from metatune.contracts import (
    DatasetProfiled,
    ErrorKind,
    JobRequested,
    PredictionSource,
    RunCompleted,
    RunFailed,
    StopReason,
    StudySpec,
    StudyStopped,
)
from metatune.knowledge.records import KbRun, RunStatus
from metatune.knowledge.store import KnowledgeStore
from metatune.service import Service
from metatune.settings import Settings

from .adapters.prior_cache import prior_cache
from .domain.fitted import PriorStore
from .domain.kb_rows import objective
from .domain.recommender import COLD_START, TOP_K, Advice, Recommender, profile_descriptors
from .flywheel import load_seeds, register_flywheel
from .run_gate import accepted

log = logging.getLogger("metatune.recommender")


@dataclass(frozen=True)
class FinishedTrial:
    """A study's finished trial, as the loop counts and scores it: from the knowledge base, or
    from the event just received (which the KB may not hold yet)."""

    run_id: str
    config: dict[str, Any]
    metric: float | None
    metric_name: str | None
    status: RunStatus

    @classmethod
    def of(cls, run: KbRun) -> FinishedTrial:
        return cls(run.run_id, run.config, run.metric, run.metric_name, run.status)


def job_id_for(study_id: UUID, index: int) -> UUID:
    return uuid5(NAMESPACE_URL, f"metatune:{study_id}:{index}")


class RecommenderCache:
    """One :class:`Recommender` per knowledge-base state (run count): refitted when the flywheel adds runs."""

    def __init__(self, store: KnowledgeStore, priors: PriorStore | None = None) -> None:
        self.store = store
        self.priors = priors  # fitted priors on disk: a restart or a second replica fits none again
        self._key: tuple[int, str] | None = None
        self._recommender: Recommender | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Recommender:
        runs = await self.store.runs()
        key = (len(runs), runs[-1].run_id if runs else "")
        async with self._lock:
            if self._recommender is None or key != self._key:
                self._recommender, self._key = Recommender(runs, store=self.priors), key
            return self._recommender


def create_service(
    settings: Settings | None = None,
    *,
    store: KnowledgeStore | None = None,
    load_seed_kb: bool = True,
) -> Service:
    service = Service("recommender", settings=settings)
    settings = service.settings
    store = store or KnowledgeStore(
        settings.database_url, connect_timeout_s=settings.connect_timeout_s
    )
    register_flywheel(service, store)
    if load_seed_kb:

        async def seed() -> (
            None
        ):  # a closure, not functools.partial: FastStream inspects the signature
            await load_seeds(store)

        service.app.on_startup(seed)

    async def close() -> None:
        await store.close()

    service.app.on_shutdown(close)
    cache = RecommenderCache(store, prior_cache(settings))
    decided: set[tuple[UUID, int]] = set()  # (study, trial index) already answered by this process
    requested: dict[
        UUID, dict[str, dict]
    ] = {}  # study -> job id -> config (the pending trials' fantasies)

    async def advise(
        spec: StudySpec,
        profile: dict,
        k: int,
        observed: list[tuple[dict, float]],
        pending: list[dict] | None = None,
    ) -> Advice:
        recommender = await cache.get()
        # fitting the prior is CPU work: off the event loop, so heartbeats and acks go on
        return await asyncio.to_thread(
            recommender.recommend, spec.base_model, profile, k, observed, pending or []
        )

    async def report(advice: Advice, study_id: UUID, subject: str) -> None:
        for warning in advice.warnings:
            await service.report_error(
                code="base_model_fallback",
                message=warning,
                subject=subject,
                correlation_id=study_id,
                details={"base_model": advice.base_model},
            )
        if advice.error is not None:
            await service.report_error(
                code="knowledge_base_unusable",
                kind=ErrorKind.unavailable,
                message=f"{advice.error}; the cold-start portfolio answered",
                subject=subject,
                correlation_id=study_id,
            )

    async def request(advice: Advice, study_id: UUID, spec: StudySpec, first_index: int) -> None:
        source = (
            PredictionSource.cold_start
            if advice.source == COLD_START
            else PredictionSource.knowledge_base
        )
        for offset, rec in enumerate(advice.recommendations):
            index = first_index + offset
            if index >= spec.trials:
                break
            job_id = job_id_for(study_id, index)
            await service.publish(
                subjects.JOBS_REQUESTED,
                JobRequested(
                    event_id=uuid5(NAMESPACE_URL, f"metatune:job-requested:{job_id}"),
                    occurred_at=service.clock.now(),
                    correlation_id=str(study_id),
                    job_id=job_id,
                    study_id=study_id,
                    trial_index=index,
                    spec=spec,
                    config=rec.config,
                    predicted_metric=rec.predicted,
                    predicted_metric_std=rec.std,
                    metric_name=rec.metric_name,
                    prediction_source=source,
                    acquisition=rec.acquisition,
                    imputed_features=advice.imputed,
                    gpus=spec.gpus_per_trial,
                    # data-parallel: the same GPU-hours spread over the devices, each drawing power
                    estimated_gpu_hours=rec.estimated_gpu_hours,
                    power_kw=rec.power_kw * spec.gpus_per_trial,
                    deadline=spec.deadline,
                ),
            )
            requested.setdefault(study_id, {})[str(job_id)] = rec.config.model_dump(mode="json")

    async def stop(
        study_id: UUID,
        reason: StopReason,
        requested: int,
        finished: list[FinishedTrial],
        best_ei: float | None,
        threshold: float | None,
    ) -> None:
        scored = [(r.metric, r.metric_name) for r in finished if r.metric is not None]
        best = max(scored, key=lambda pair: pair[0], default=None)
        await service.publish(
            subjects.STUDIES_STOPPED,
            StudyStopped(
                event_id=uuid5(NAMESPACE_URL, f"metatune:study-stopped:{study_id}"),
                occurred_at=service.clock.now(),
                correlation_id=str(study_id),
                study_id=study_id,
                reason=reason,
                trials_requested=requested,
                trials_finished=len(finished),
                best_expected_improvement=best_ei,
                threshold=threshold,
                best_metric=best[0] if best else None,
                metric_name=best[1] if best else None,
            ),
        )

    @service.consume(subjects.DATASETS_PROFILED, durable="recommender")
    async def on_profiled(event: DatasetProfiled) -> None:
        """The study's first min(3, trials) trials, one job request each."""
        advice = await advise(
            event.spec, profile_descriptors(event.features), min(TOP_K, event.spec.trials), []
        )
        await report(advice, event.study_id, subjects.DATASETS_PROFILED)
        await request(advice, event.study_id, event.spec, 0)

    async def on_finished(
        study_id: UUID, job_id: UUID, subject: str, this_run: FinishedTrial | None
    ) -> None:
        profile = await store.profile(study_id)
        if profile is None:
            raise LookupError(
                f"study {study_id}: no profile yet"
            )  # redelivered until the profile is stored
        runs = {r.run_id: FinishedTrial.of(r) for r in await store.study_runs(study_id)}
        if this_run is not None:
            runs.setdefault(this_run.run_id, this_run)
        runs.setdefault(str(job_id), FinishedTrial(str(job_id), {}, None, None, RunStatus.failed))
        finished = list(runs.values())
        spec = profile.spec
        first = min(TOP_K, spec.trials)
        index = first + len(finished) - 1
        if (study_id, index) in decided:
            return  # a redelivered completion: that slot was answered (the KB may have changed since)
        if index >= spec.trials:
            await stop(study_id, StopReason.budget, spec.trials, finished, None, None)
            decided.add((study_id, index))
            return
        observed = [
            (r.config, r.metric)
            for r in finished
            if r.metric is not None and r.status != RunStatus.failed
        ]
        pending = [c for job, c in requested.get(study_id, {}).items() if job not in runs]
        advice = await advise(spec, profile_descriptors(profile.features), 1, observed, pending)
        await report(advice, study_id, subject)
        recommender = await cache.get()
        if advice.source != COLD_START and recommender.should_stop(advice, len(observed)):
            await stop(
                study_id,
                StopReason.expected_improvement,
                index,
                finished,
                advice.best_ei,
                recommender.ei_threshold,
            )
        else:
            await request(advice, study_id, spec, index)
        decided.add((study_id, index))

    @service.consume(subjects.RUNS_COMPLETED_ALL, durable="recommender-next-trial")
    async def on_completed(event: RunCompleted, message: NatsMessage) -> None:
        """The next trial by EI, or the study's stop (a completion from elsewhere than the job's
        datacenter is refused: the knowledge-base consumer reports it)."""
        subject = message.raw_message.subject
        if not await accepted(service, event, subject, report=False):
            return
        metric_name, metric = objective(event.metrics)
        this = FinishedTrial(
            str(event.job_id),
            event.config.model_dump(mode="json"),
            metric,
            metric_name,
            RunStatus.completed,
        )
        await on_finished(event.study_id, event.job_id, subject, this)

    @service.consume(subjects.RUNS_FAILED_ALL, durable="recommender-next-trial-failed")
    async def on_failed(event: RunFailed, message: NatsMessage) -> None:
        """A failed trial uses up its slot of the budget; the next one is still chosen."""
        subject = message.raw_message.subject
        if event.study_id is not None and await accepted(service, event, subject, report=False):
            await on_finished(event.study_id, event.job_id, subject, None)

    return service
