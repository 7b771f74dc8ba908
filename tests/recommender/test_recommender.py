"""Through real NATS and PostgreSQL: profiled -> three jobs requested -> one completes -> the next trial."""

from __future__ import annotations

import uuid

import pytest

from metatune import subjects
from metatune.contracts import (
    JobRequested,
    PredictionSource,
)
from metatune.knowledge.records import Hardware
from metatune.knowledge.store import KnowledgeStore
from metatune.settings import Settings
from metatune_recommender.adapters.loop_store import LoopStore
from metatune_recommender.app import create_service
from metatune_recommender.domain.cold_start import PORTFOLIO, cold_start_trials
from metatune_recommender.domain.study_loop import job_id_for
from tests.support.builders import profiled
from tests.support.samples import FEATURES, SPEC, agent_status, record_assignment
from tests.support.studies import acked_through, completion, requests_and_stops, requests_stored
from tests.support.waiting import received_on, wait_for

from .synthetic import kb_runs


def test_cold_start_portfolio_stays_the_documented_empty_base_answer() -> None:
    trials = cold_start_trials(FEATURES, 3)
    assert [t.config.rank for t in trials] == [c.rank for c in PORTFOLIO[:3]]


async def test_profiled_three_jobs_one_completes_next_trial(
    settings: Settings,
    store: KnowledgeStore,
) -> None:
    await store.add_runs(kb_runs(datasets=3))
    service = create_service(settings, store=store, load_seed_kb=False)
    study = uuid.uuid4()
    spec = SPEC.model_copy(update={"trials": 4})
    async with service.running():
        nc = service.broker.connection
        requests, stopped = await requests_and_stops(nc)
        profile = profiled(study, spec)
        for _ in range(2):  # redelivered profile: still three jobs, each published once
            ack = await service.js.publish(
                subjects.DATASETS_PROFILED, profile.to_bytes(), stream=settings.stream_name
            )
        await wait_for(
            lambda: acked_through(service.js, settings.stream_name, "recommender", ack.seq),
            "both profiles handled",
            timeout=120,
        )
        assert await requests_stored(service.js, settings.stream_name) == 3
        await wait_for(lambda: len(requests) >= 3, timeout=30)
        assert len(requests) == 3  # the second profile published nothing, not even a duplicate
        first = {r.trial_index: r for r in requests}
        assert sorted(first) == [0, 1, 2]
        assert all(r.prediction_source is PredictionSource.knowledge_base for r in first.values())
        assert all(
            r.predicted_metric is not None and r.metric_name == "accuracy" for r in first.values()
        )
        assert len({r.config.model_dump_json() for r in first.values()}) == 3
        done = first[0]
        completed = completion(done, accuracy=0.5)
        await record_assignment(service.js, done.job_id, "fra1")
        for _ in range(2):  # redelivered completion: one next trial
            await service.js.publish(
                subjects.runs_completed("fra1"), completed.to_bytes(), stream=settings.stream_name
            )
        # a poor first result (0.5, the synthetic base reaches 0.9) leaves expected improvement: a 4th trial
        await wait_for(lambda: any(r.trial_index == 3 for r in requests), timeout=120)
        fourth = [r for r in requests if r.trial_index == 3]
        assert {r.job_id for r in fourth} == {job_id_for(study, 3)}
        assert fourth[0].acquisition == "expected-improvement"
        assert fourth[0].config.model_dump_json() not in {
            r.config.model_dump_json() for r in first.values()
        }
        # the next completion ends the study (budget of 4 spent), saying why
        second = completed.model_copy(update={"job_id": first[1].job_id, "config": first[1].config})
        await record_assignment(service.js, first[1].job_id, "fra1")
        await service.js.publish(
            subjects.runs_completed("fra1"), second.to_bytes(), stream=settings.stream_name
        )
        await wait_for(lambda: bool(stopped), timeout=120)
        stored = await requests_stored(service.js, settings.stream_name)
        record, _ = await LoopStore(lambda: service.js).load(study)
    # the study's loop state, durable in KV, keeps only that it stopped
    assert record is not None and not record.outbox
    assert record.loop.stopped is stopped[0].reason and record.loop.requested == {}
    # budget spent (4 requested) or, if the best EI already fell below the threshold, EI: either says why
    assert stopped[0].study_id == study and stopped[0].reason.value in {
        "budget",
        "expected_improvement",
    }
    assert stopped[0].best_metric == 0.5 and stopped[0].trials_finished == 2
    assert stored == 4  # every job requested once in the stream


async def test_empty_knowledge_base_answers_with_the_flagged_portfolio(
    settings: Settings,
    store: KnowledgeStore,
) -> None:
    service = create_service(settings, store=store, load_seed_kb=False)
    study = uuid.uuid4()
    async with service.running():
        nc = service.broker.connection
        requests = await received_on(nc, subjects.JOBS_REQUESTED, JobRequested)
        # trials on two devices each: the job holds two GPUs and draws the power of both
        spec = SPEC.model_copy(update={"gpus_per_trial": 2})
        profile = profiled(study, spec)
        await service.js.publish(
            subjects.DATASETS_PROFILED, profile.to_bytes(), stream=settings.stream_name
        )
        await wait_for(lambda: len(requests) >= 3, timeout=60)
    assert {r.prediction_source for r in requests} == {PredictionSource.cold_start}
    ordered = sorted(requests, key=lambda r: r.trial_index)
    assert [r.config.rank for r in ordered] == [c.rank for c in PORTFOLIO[:3]]
    one_device = cold_start_trials(FEATURES, 3)
    assert [r.gpus for r in ordered] == [2, 2, 2]
    assert [r.power_kw for r in ordered] == pytest.approx([2 * t.power_kw for t in one_device])
    assert [r.estimated_gpu_hours for r in ordered] == pytest.approx(
        [t.estimated_gpu_hours for t in one_device]
    )


async def test_trials_are_priced_for_the_device_the_agents_train_on(
    settings: Settings,
    store: KnowledgeStore,
) -> None:
    """The knowledge base holds the same runs on a GPU and, ten times slower, on the CPU: until an
    agent says what it trains on, trials are priced from the GPU runs; once the only agent says
    ``cpu``, from the CPU runs (ten times the hours, the same power)."""
    cpu = kb_runs(datasets=3)
    gpu = [
        r.model_copy(
            update={
                "run_id": f"{r.run_id}:gpu",
                "tokens_with_padding": 10 * r.tokens_with_padding,
                "hardware": Hardware(device="cuda"),
            }
        )
        for r in cpu
    ]
    await store.add_runs(cpu + gpu)
    service = create_service(settings, store=store, load_seed_kb=False)
    before, after = uuid.uuid4(), uuid.uuid4()
    async with service.running():
        nc = service.broker.connection
        requests = await received_on(nc, subjects.JOBS_REQUESTED, JobRequested)

        async def profile(study: uuid.UUID) -> list[JobRequested]:
            event = profiled(study)
            await service.js.publish(
                subjects.DATASETS_PROFILED, event.to_bytes(), stream=settings.stream_name
            )
            await wait_for(lambda: sum(r.study_id == study for r in requests) >= 3, timeout=120)
            return sorted((r for r in requests if r.study_id == study), key=lambda r: r.trial_index)

        on_gpu = await profile(before)
        agent = agent_status("fra1", "cpu", 4)
        ack = await service.js.publish(
            subjects.agent_status("fra1"), agent.to_bytes(), stream=settings.status_stream_name
        )
        await wait_for(
            lambda: acked_through(
                service.js, settings.status_stream_name, "recommender-agents", ack.seq
            ),
            "the agent's status folded",
            timeout=60,
        )
        on_cpu = await profile(after)
    assert [r.config for r in on_cpu] == [r.config for r in on_gpu]
    assert [r.estimated_gpu_hours for r in on_cpu] == pytest.approx(
        [10 * r.estimated_gpu_hours for r in on_gpu], rel=1e-3
    )
    assert [r.power_kw for r in on_cpu] == pytest.approx([r.power_kw for r in on_gpu])
