"""Recommender service: a profiled dataset becomes job requests; completions bring the next trial by EI.

* ``metatune.datasets.profiled``: the top-min(3, trials) configurations from the GP recommender
  (or the cold-start portfolio, flagged, when the knowledge base cannot answer), each a
  ``metatune.jobs.requested`` with its prediction and cost.
* ``metatune.runs.<dc>.completed`` / ``.failed`` (from the job's datacenter only): while the study's
  budget (``spec.trials``) is not spent, the next trial by Expected Improvement conditioned on the
  study's finished runs; when the budget is spent or the best EI falls below the threshold, one
  ``metatune.studies.stopped``.
* ``metatune.studies.cancelled``: the study stops (``metatune.studies.stopped``, reason
  ``cancelled``) and no later event of it requests a trial.
* ``metatune.agents.<dc>.status``: what the agents train on, so trials are priced from the
  knowledge base's runs on that device.
* ``metatune.requests.knowledge.runs`` (core NATS request/reply): how many runs of the studies
  asked the knowledge base holds, so no tool reads the recommender's tables.
* ``metatune.requests.knowledge.evidence`` (request/reply): each study's nearest datasets in the
  knowledge base with the best run measured on them (the demo's closing table).

The decisions are :class:`~.domain.study_loop.StudyLoop`'s; its state is kept per study in KV
(:mod:`.adapters.loop_store`), so a restart loses and doubles nothing. Ids are stable: job =
uuid5(study, trial index). The knowledge base is read through :class:`KnowledgeStore` (the
flywheel keeps it current); the fitted prior is cached per base model and refitted when the base
grows. This module only wires: each handler is one call into :class:`.adapters.loop_runtime.LoopRuntime`.
"""

from __future__ import annotations

from faststream.nats.annotations import NatsMessage

from metatune import subjects
from metatune.contracts import (
    AgentStatus,
    DatasetProfiled,
    KnowledgeEvidence,
    KnowledgeEvidenceReply,
    KnowledgeRuns,
    KnowledgeRunsReply,
    RunCompleted,
    RunFailed,
    StudyCancelled,
)
from metatune.knowledge.store import KnowledgeStore
from metatune.service import Service
from metatune.settings import Settings
from metatune.tenancy import FOREIGN_TENANT, mislabelled

from .adapters.advisor import Advisor, RecommenderCache
from .adapters.evidence import answer_evidence
from .adapters.flywheel import count_runs, load_seeds, register_flywheel
from .adapters.loop_runtime import LoopRuntime
from .adapters.loop_store import LoopStore
from .adapters.prior_cache import prior_cache


def create_service(
    settings: Settings | None = None,
    *,
    store: KnowledgeStore | None = None,
    load_seed_kb: bool = True,
) -> Service[LoopRuntime]:
    service: Service[LoopRuntime] = Service("recommender", settings=settings)
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
    advisor = Advisor(service, cache)
    runtime = service.runtime = LoopRuntime(service, store, advisor, LoopStore(lambda: service.js))

    @service.consume(subjects.DATASETS_PROFILED, durable="recommender")
    async def on_profiled(event: DatasetProfiled) -> None:
        """The study's first min(3, trials) trials, one job request each."""
        await runtime.profiled(event)

    @service.consume(subjects.RUNS_COMPLETED_ALL, durable="recommender-next-trial")
    async def on_completed(event: RunCompleted, message: NatsMessage) -> None:
        """The next trial by EI, or the study's stop (a completion from elsewhere than the job's
        datacenter is refused: the knowledge-base consumer reports it)."""
        await runtime.completed(event, message.raw_message.subject)

    @service.consume(subjects.RUNS_FAILED_ALL, durable="recommender-next-trial-failed")
    async def on_failed(event: RunFailed, message: NatsMessage) -> None:
        """A failed trial uses up its slot of the budget; the next one is still chosen."""
        await runtime.failed(event, message.raw_message.subject)

    @service.consume(subjects.STUDIES_CANCELLED_ALL, durable="recommender-cancelled")
    async def on_cancelled(event: StudyCancelled, message: NatsMessage) -> None:
        """The study stops: one StudyStopped (cancelled), nothing requested afterwards. A tenant
        cancels its own studies only (``foreign_tenant`` otherwise, and nothing stops)."""
        subject = message.raw_message.subject
        why = mislabelled(subjects.tenant_of(subject), event.tenant)
        if why is None and (profile := await store.profile(event.study_id)) is not None:
            why = mislabelled(event.tenant, profile.spec.tenant)
        if why is not None:
            await service.report_error(
                code=FOREIGN_TENANT, message=why, subject=subject, correlation_id=event.study_id
            )
            return
        await runtime.cancelled(event)

    @service.consume(subjects.AGENTS_STATUS_ALL, durable="recommender-agents")
    async def on_agent(event: AgentStatus) -> None:
        """The device an agent trains on: the trials' costs are priced for the fleet's."""
        advisor.fleet.fold(event)

    @service.broker.subscriber(subjects.KNOWLEDGE_RUNS, queue="recommender")
    async def on_knowledge_runs(request: KnowledgeRuns) -> KnowledgeRunsReply:
        """How many runs of these studies the knowledge base holds (a core-NATS request, answered
        on the requester's inbox; the store is migrated before the service subscribes)."""
        return await count_runs(store, request)

    @service.broker.subscriber(subjects.KNOWLEDGE_EVIDENCE, queue="recommender")
    async def on_knowledge_evidence(request: KnowledgeEvidence) -> KnowledgeEvidenceReply:
        """Each study's nearest measured datasets in the knowledge base (a core-NATS request)."""
        return await answer_evidence(store, cache, request)

    return service
