"""The recommender as the study loop consults it: fitted on the knowledge base as it stands (refitted
when the flywheel adds runs), run off the event loop, its warnings reported on the bus."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from metatune.contracts import ErrorKind, StudySpec
from metatune.knowledge.store import KnowledgeStore
from metatune.service import Service

from ..domain.fitted import PriorStore
from ..domain.fleet import Fleet
from ..domain.recommender import Advice, Recommender
from ..domain.study_loop import Ask


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


class Advisor:
    def __init__(self, service: Service, cache: RecommenderCache) -> None:
        self.service = service
        self.cache = cache
        self.fleet = Fleet()  # the agents' statuses: the device the trials are priced for

    async def advise(
        self, spec: StudySpec, profile: dict[str, Any], ask: Ask
    ) -> tuple[Advice, Recommender]:
        """The advice for ``ask``, and the recommender that gave it (for its stop rule)."""
        recommender = await self.cache.get()
        # fitting the prior is CPU work: off the event loop, so heartbeats and acks go on
        advice = await asyncio.to_thread(
            recommender.recommend,
            spec.base_model,
            profile,
            ask.count,
            ask.observed,
            ask.pending,
            fleet_device=self.fleet.device,
            budget=spec.budget,
        )
        return advice, recommender

    async def report(self, advice: Advice, study_id: UUID, subject: str) -> None:
        """The advice's fallbacks, as errors the submitter sees."""
        for warning in advice.warnings:
            await self.service.report_error(
                code="base_model_fallback",
                message=warning,
                subject=subject,
                correlation_id=study_id,
                details={"base_model": advice.base_model},
            )
        if advice.error is not None:
            await self.service.report_error(
                code="knowledge_base_unusable",
                kind=ErrorKind.unavailable,
                message=f"{advice.error}; the cold-start portfolio answered",
                subject=subject,
                correlation_id=study_id,
            )
