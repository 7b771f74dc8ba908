"""``metatune.requests.knowledge.evidence`` through real NATS and PostgreSQL: the recommender answers
each study's nearest measured datasets from its knowledge base (the shipped seed here), a study it
holds no profile of with why, and stores nothing; the demo asks it instead of running a program."""

from __future__ import annotations

import uuid

from metatune import subjects
from metatune.contracts import KnowledgeEvidence, KnowledgeEvidenceReply
from metatune.knowledge.files import read_kb_file
from metatune.knowledge.store import KnowledgeStore
from metatune.settings import Settings
from metatune_recommender.adapters.evidence import NO_PROFILE
from metatune_recommender.adapters.flywheel import seed_path
from metatune_recommender.app import create_service
from tests.support.requests import answer
from tests.support.samples import SPEC


async def test_the_recommender_answers_a_studys_nearest_measured_datasets(
    settings: Settings, store: KnowledgeStore
) -> None:
    seed = read_kb_file(seed_path())
    like = next(run for run in seed.runs if run.dataset.features is not None)
    assert like.dataset.features is not None
    await store.migrate()
    await store.import_file(seed_path())
    profiled, unknown = uuid.uuid4(), uuid.uuid4()
    spec = SPEC.model_copy(update={"base_model": like.base_model})
    await store.save_profile(profiled, spec, like.dataset.features)
    service = create_service(settings, store=store, load_seed_kb=False)
    async with service.running():
        nc = service.broker.connection
        ask = KnowledgeEvidence(study_ids=[profiled, unknown])
        reply = await answer(nc, subjects.KNOWLEDGE_EVIDENCE, ask, KnowledgeEvidenceReply)
        stored = await service.js.stream_info(settings.stream_name, subjects_filter=">")
    assert set(reply.evidence) == {profiled, unknown}
    assert reply.evidence[unknown].error == NO_PROFILE and not reply.evidence[unknown].nearest
    found = reply.evidence[profiled]
    assert found.error is None and found.base_model == like.base_model
    assert found.metric_name == "accuracy" and found.budget and "128 tokens" in found.budget
    # a dataset's own profile is nearest to itself: its runs' best at the seed's budget
    nearest = found.nearest[0]
    assert nearest.dataset == like.dataset.name
    same = [r for r in seed.runs if r.dataset.name == like.dataset.name and r.metric is not None]
    assert nearest.best_measured == max(r.metric for r in same if r.metric is not None)
    assert 1 <= nearest.runs <= len(same) and len(found.nearest) == 2
    assert found.nearest[0].similarity >= found.nearest[1].similarity
    assert stored.state.subjects is None or subjects.KNOWLEDGE_EVIDENCE not in stored.state.subjects
