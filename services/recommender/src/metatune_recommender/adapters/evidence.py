"""``metatune.requests.knowledge.evidence``: each study's nearest measured datasets, from the
knowledge base as the recommender holds it (its fitted :class:`RecommenderCache`, the store's
profiles); read only, computed off the event loop."""

from __future__ import annotations

import asyncio
from uuid import UUID

from metatune.contracts import KnowledgeEvidence, KnowledgeEvidenceReply, StudyEvidence
from metatune.knowledge.store import KnowledgeStore

from ..domain.evidence import nearest_measured
from .advisor import RecommenderCache

NO_PROFILE = "no profile of this study in the knowledge base"


async def answer_evidence(
    store: KnowledgeStore, cache: RecommenderCache, request: KnowledgeEvidence
) -> KnowledgeEvidenceReply:
    recommender = await cache.get()
    evidence: dict[UUID, StudyEvidence] = {}
    for study_id in request.study_ids:
        profile = await store.profile(study_id)
        if profile is None:
            evidence[study_id] = StudyEvidence(error=NO_PROFILE)
            continue
        evidence[study_id] = await asyncio.to_thread(
            nearest_measured,
            recommender,
            profile.spec.base_model,
            profile.features.model_dump(),
            study_id=study_id,
        )
    return KnowledgeEvidenceReply(evidence=evidence)
