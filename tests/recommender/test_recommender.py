"""Cold-start recommendations: sized from the profile, distinct, and requested once per trial."""

from __future__ import annotations

import asyncio

from metatune import subjects
from metatune.contracts import DatasetProfiled, JobRequested
from metatune.settings import Settings
from metatune_recommender.app import create_service
from metatune_recommender.domain.cold_start import PORTFOLIO, cold_start_trials

from ..foundation.conftest import settings  # noqa: F401  (fixture)
from ..foundation.samples import FEATURES, NOW, SPEC, STUDY


def test_trials_are_distinct_prefixes_of_the_portfolio() -> None:
    trials = cold_start_trials(FEATURES, 3)
    assert len(trials) == 3
    assert len({(t.config.rank, t.config.learning_rate) for t in trials}) == 3
    assert [t.config.rank for t in trials] == [c.rank for c in PORTFOLIO[:3]]


def test_cost_grows_with_dataset_size_and_sequence_length_covers_p95() -> None:
    small = cold_start_trials(FEATURES.model_copy(update={"n_examples": 10_000_000}), 1)[0]
    large = cold_start_trials(FEATURES.model_copy(update={"n_examples": 40_000_000}), 1)[0]
    assert large.estimated_gpu_hours > small.estimated_gpu_hours
    long_texts = FEATURES.model_copy(update={"tokens_p95": 300.0})
    assert cold_start_trials(long_texts, 1)[0].config.max_seq_length >= 300


async def test_profile_becomes_job_requests_once(settings: Settings) -> None:  # noqa: F811
    service = create_service(settings)
    requests: list[JobRequested] = []

    async def collect(msg) -> None:  # core NATS sees every publish; the stream de-duplicates
        requests.append(JobRequested.model_validate_json(msg.data))

    async with service.running():
        await service.broker.config.connection_state.connection.subscribe(subjects.JOBS_REQUESTED, cb=collect)
        profiled = DatasetProfiled(occurred_at=NOW, study_id=STUDY, spec=SPEC.model_copy(update={"trials": 3}),
                                   features=FEATURES)
        for _ in range(2):  # the same profile delivered twice (e.g. a profiler retry)
            await service.js.publish(subjects.DATASETS_PROFILED, profiled.to_bytes(), stream=settings.stream_name)
        for _ in range(100):
            if len(requests) >= 6:
                break
            await asyncio.sleep(0.05)
        info = await service.js.stream_info(settings.stream_name, subjects_filter=subjects.JOBS_REQUESTED)
    assert len({r.job_id for r in requests}) == 3
    assert {r.study_id for r in requests} == {STUDY} and sorted({r.trial_index for r in requests}) == [0, 1, 2]
    assert info.state.messages == 2 + 3  # the stream kept each job request once (de-duplicated by event_id)
