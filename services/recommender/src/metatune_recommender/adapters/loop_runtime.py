"""The study loop inside the service: load the study's state, let :class:`StudyLoop` decide, write
the decision, publish it (see :mod:`.loop_store` for the order and why it survives a kill -9).

No study is held in memory between events: a lock per study (dropped when no event of the study
is being handled) keeps two consumers of one process from deciding the same slot at once.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from uuid import NAMESPACE_URL, UUID, uuid5

from metatune import subjects
from metatune.contracts import (
    DatasetProfiled,
    JobRequested,
    PredictionSource,
    RunCompleted,
    RunFailed,
    StudyCancelled,
    StudySpec,
    StudyStopped,
)
from metatune.knowledge.records import RunStatus
from metatune.knowledge.store import KnowledgeStore
from metatune.service import Service

from ..domain.kb_rows import objective
from ..domain.recommender import COLD_START, Advice, profile_descriptors
from ..domain.study_loop import Ask, FinishedTrial, Request, Stop, StudyLoop, job_id_for
from .advisor import Advisor
from .loop_store import LoopRecord, LoopStore
from .run_gate import accepted

log = logging.getLogger("metatune.recommender")


class LoopRuntime:
    def __init__(
        self, service: Service, store: KnowledgeStore, advisor: Advisor, records: LoopStore
    ) -> None:
        self.service = service
        self.store = store
        self.advisor = advisor
        self.records = records
        self._locks: weakref.WeakValueDictionary[UUID, asyncio.Lock] = weakref.WeakValueDictionary()

    def _lock(self, study_id: UUID) -> asyncio.Lock:
        lock = self._locks.get(study_id)
        if lock is None:
            lock = self._locks[study_id] = asyncio.Lock()
        return lock

    # ----------------------------------------------------------------- the handlers' entries
    async def profiled(self, event: DatasetProfiled) -> None:
        """The study's opening batch (nothing on a redelivered profile)."""
        async with self._lock(event.study_id):
            record, revision = await self._settled(event.study_id)
            loop = record.loop if record else StudyLoop.new(event.study_id, event.spec.trials)
            ask = loop.opening()
            if ask is not None:
                profile = profile_descriptors(event.features)
                await self._decide(loop, revision, ask, event.spec, profile, [])

    async def completed(self, event: RunCompleted, subject: str) -> None:
        """A trial finished (from its job's datacenter only: the knowledge-base consumer reports
        a completion from elsewhere)."""
        if not await accepted(self.service, event, subject, report=False):
            return
        metric_name, metric = objective(event.metrics)
        this = FinishedTrial(
            str(event.job_id),
            event.config.model_dump(mode="json"),
            metric,
            metric_name,
            RunStatus.completed,
        )
        await self._finished(event.study_id, event.job_id, subject, this)

    async def failed(self, event: RunFailed, subject: str) -> None:
        """A failed trial uses up its slot of the budget."""
        if event.study_id is not None and await accepted(
            self.service, event, subject, report=False
        ):
            await self._finished(event.study_id, event.job_id, subject, None)

    async def cancelled(self, event: StudyCancelled) -> None:
        """The study stops (``cancelled``) and requests nothing more; one cancelled before its
        profile arrived gets a stopped loop, so its profile requests nothing (budget unknown yet,
        and never used once stopped)."""
        async with self._lock(event.study_id):
            record, revision = await self._settled(event.study_id)
            loop = record.loop if record else StudyLoop.new(event.study_id, 0)
            stop = loop.cancel()
            if stop is None:  # stopped already: a redelivery, or a study that had ended
                return
            runs = await self.store.study_runs(event.study_id)
            finished = [FinishedTrial.of(r) for r in runs]
            stopped = self._stopped(event.study_id, stop, finished, None, None)
            done = LoopRecord(loop=loop.after(stop), stop=stopped)
            await self._flush(done, await self.records.save(done, revision))

    # ----------------------------------------------------------------- the loop
    async def _finished(
        self, study_id: UUID, job_id: UUID, subject: str, this_run: FinishedTrial | None
    ) -> None:
        profile = await self.store.profile(study_id)
        if profile is None:  # redelivered until the profile is stored
            raise LookupError(f"study {study_id}: no profile yet")
        async with self._lock(study_id):
            record, revision = await self._settled(study_id)
            if record is None:
                log.warning("study %s: no loop state (not requested by this recommender)", study_id)
                return
            stored = [FinishedTrial.of(r) for r in await self.store.study_runs(study_id)]
            this = this_run if this_run is not None else FinishedTrial.failed(job_id)
            loop = record.loop.counting([*stored, this])
            finished = list(loop.finished.values())
            step = loop.next(finished)
            if isinstance(step, Stop):
                await self._commit(loop, revision, step, profile.spec, finished, None)
            elif isinstance(step, Ask):
                features = profile_descriptors(profile.features)
                await self._decide(loop, revision, step, profile.spec, features, finished, subject)
            elif loop != record.loop:  # counted, nothing to request yet
                await self.records.save(LoopRecord(loop=loop), revision)

    async def _decide(
        self,
        loop: StudyLoop,
        revision: int | None,
        ask: Ask,
        spec: StudySpec,
        profile: dict,
        finished: list[FinishedTrial],
        subject: str = subjects.DATASETS_PROFILED,
    ) -> None:
        advice, recommender = await self.advisor.advise(spec, profile, ask)
        await self.advisor.report(advice, loop.study_id, subject)
        low = recommender.should_stop(advice, len(ask.observed))
        outcome = loop.answer(ask, advice, ei_below_threshold=low)
        threshold = recommender.ei_threshold if isinstance(outcome, Stop) else None
        await self._commit(loop, revision, outcome, spec, finished, advice, threshold)

    async def _commit(
        self,
        loop: StudyLoop,
        revision: int | None,
        outcome: Request | Stop,
        spec: StudySpec,
        finished: list[FinishedTrial],
        advice: Advice | None,
        threshold: float | None = None,
    ) -> None:
        """Write the decision with its events, publish them, empty the outbox."""
        if isinstance(outcome, Stop):
            best_ei = advice.best_ei if advice is not None else None
            record = LoopRecord(
                loop=loop.after(outcome),
                stop=self._stopped(loop.study_id, outcome, finished, best_ei, threshold),
            )
        else:
            assert advice is not None  # a request always follows an advice
            requests = self._requests(loop.study_id, spec, outcome, advice)
            record = LoopRecord(loop=loop.after(outcome), requests=requests)
        await self._flush(record, await self.records.save(record, revision))

    async def _settled(self, study_id: UUID) -> tuple[LoopRecord | None, int | None]:
        """The study's record, its outbox published first (a process killed after writing a
        decision and before publishing all of it)."""
        record, revision = await self.records.load(study_id)
        if record is not None and revision is not None and record.outbox:
            log.info("study %s: publishing the decision a previous process wrote", study_id)
            record, revision = await self._flush(record, revision)
        return record, revision

    async def _flush(self, record: LoopRecord, revision: int) -> tuple[LoopRecord, int]:
        for request in record.requests:
            await self.service.publish(subjects.JOBS_REQUESTED, request)
        if record.stop is not None:
            await self.service.publish(subjects.STUDIES_STOPPED, record.stop)
        if not record.outbox:
            return record, revision
        done = LoopRecord(loop=record.loop)
        return done, await self.records.save(done, revision)

    # ----------------------------------------------------------------- the events
    def _requests(
        self, study_id: UUID, spec: StudySpec, outcome: Request, advice: Advice
    ) -> list[JobRequested]:
        source = (
            PredictionSource.cold_start
            if advice.source == COLD_START
            else PredictionSource.knowledge_base
        )
        events = []
        for index, rec in outcome.trials:
            job_id = job_id_for(study_id, index)
            events.append(
                JobRequested(
                    event_id=uuid5(NAMESPACE_URL, f"metatune:job-requested:{job_id}"),
                    occurred_at=self.service.clock.now(),
                    correlation_id=str(study_id),
                    job_id=job_id,
                    study_id=study_id,
                    trial_index=index,
                    spec=spec,
                    config=rec.config,
                    predicted_metric=rec.predicted,
                    predicted_metric_std=rec.std,
                    predicted_metric_interval=rec.interval,
                    rationale=rec.reason[:500] or None,
                    metric_name=rec.metric_name,
                    prediction_source=source,
                    acquisition=rec.acquisition,
                    imputed_features=advice.imputed,
                    gpus=spec.gpus_per_trial,
                    # data-parallel: the same GPU-hours spread over the devices, each drawing power
                    estimated_gpu_hours=rec.estimated_gpu_hours,
                    power_kw=rec.power_kw * spec.gpus_per_trial,
                    deadline=spec.deadline,
                )
            )
        return events

    def _stopped(
        self,
        study_id: UUID,
        stop: Stop,
        finished: list[FinishedTrial],
        best_ei: float | None,
        threshold: float | None,
    ) -> StudyStopped:
        scored = [(r.metric, r.metric_name) for r in finished if r.metric is not None]
        best = max(scored, key=lambda pair: pair[0], default=None)
        return StudyStopped(
            event_id=uuid5(NAMESPACE_URL, f"metatune:study-stopped:{study_id}"),
            occurred_at=self.service.clock.now(),
            correlation_id=str(study_id),
            study_id=study_id,
            reason=stop.reason,
            trials_requested=stop.trials_requested,
            trials_finished=len(finished),
            best_expected_improvement=best_ei,
            threshold=threshold,
            best_metric=best[0] if best else None,
            metric_name=best[1] if best else None,
        )
