"""The study's training budget: what the recommender predicts at, prices and hands out."""

from __future__ import annotations

import uuid

import pytest

from metatune import subjects
from metatune.contracts import DatasetProfiled, JobRequested, LoraConfig, TrainingBudget
from metatune.knowledge.records import DatasetInfo
from metatune.knowledge.store import KnowledgeStore
from metatune.settings import Settings
from metatune_recommender.app import create_service
from metatune_recommender.domain.costs import Throughput, estimate
from metatune_recommender.domain.prior_settings import PriorSettings
from metatune_recommender.domain.recommender import Recommender, profile_descriptors
from tests.support.samples import FEATURES, NOW, SPEC
from tests.support.waiting import received_on, wait_for

from .synthetic import design, features, kb_run, kb_runs, score

FAST = PriorSettings(iterations=60)
BASE = "all-MiniLM-L6-v2"
PROFILE = profile_descriptors(features(5000))


def two_budget_kb() -> list:
    """Each dataset measured at 64 steps and at 512: the long budget 0.15 better everywhere."""
    runs = []
    for d in range(4):
        dataset = DatasetInfo(name=f"syn{d}", features=features(1000 + 500 * d))
        for i, config in enumerate(design(16, seed=d)):
            for steps, gain in ((64, 0.0), (512, 0.15)):
                at = {**config, "max_steps": steps}
                runs.append(kb_run(f"syn:{d}:{i}:{steps}", dataset, at, score(config) + gain, BASE))
    return runs


@pytest.mark.parametrize(
    "budget",
    [
        TrainingBudget(),
        TrainingBudget(epochs=1, max_train_rows=None),
        TrainingBudget(max_steps=200),
    ],
)
def test_every_recommendation_trains_at_the_study_budget(budget: TrainingBudget) -> None:
    for runs in (kb_runs(datasets=3), []):  # the knowledge base's answer and the cold start's
        advice = Recommender(runs, settings=FAST).recommend(BASE, PROFILE, budget=budget)
        for rec in advice.recommendations:
            config = rec.config
            assert (config.epochs, config.max_steps, config.max_train_rows) == (
                budget.epochs,
                budget.max_steps,
                budget.max_train_rows,
            )


def test_the_estimate_prices_the_budget_over_the_rows_it_trains_on() -> None:
    throughput = Throughput(tokens_per_second=50.0, power_kw=0.1, device="cpu", runs=1)
    big = features(5000)

    def hours(**lengths: object) -> float:
        config = LoraConfig.model_validate({"batch_size": 16, **lengths})
        return estimate(config, big, throughput)[0]

    one = hours(epochs=1.0, max_train_rows=1000)
    assert hours(epochs=3.0, max_train_rows=1000) == pytest.approx(3 * one)
    assert hours(epochs=3.0, max_train_rows=None) == pytest.approx(15 * one)  # 5,000 rows
    assert hours(epochs=None, max_steps=125, max_train_rows=1000) == pytest.approx(2 * one)


def test_runs_at_another_budget_inform_the_prediction_instead_of_averaging_into_it() -> None:
    recommender = Recommender(two_budget_kb(), settings=FAST)
    short = recommender.recommend(BASE, PROFILE, budget=TrainingBudget(max_steps=64))
    long = recommender.recommend(BASE, PROFILE, budget=TrainingBudget(max_steps=512))
    best_short = max(r.predicted for r in short.recommendations)
    best_long = max(r.predicted for r in long.recommendations)
    assert best_long > best_short + 0.05


async def test_the_service_requests_trials_at_the_submitted_budget(
    settings: Settings, store: KnowledgeStore
) -> None:
    await store.add_runs(kb_runs(datasets=3))
    service = create_service(settings, store=store, load_seed_kb=False)
    budget = TrainingBudget(epochs=1.5, max_train_rows=400)
    spec = SPEC.model_copy(update={"budget": budget})
    async with service.running():
        nc = service.broker.connection
        requests = await received_on(nc, subjects.JOBS_REQUESTED, JobRequested)
        profiled = DatasetProfiled(
            occurred_at=NOW, study_id=uuid.uuid4(), spec=spec, features=FEATURES
        )
        await service.js.publish(
            subjects.DATASETS_PROFILED, profiled.to_bytes(), stream=settings.stream_name
        )
        await wait_for(lambda: len(requests) >= 3, "three trials requested", timeout=120)
    for request in requests:
        assert request.rationale and request.predicted_metric_interval is not None
        low, high = request.predicted_metric_interval
        assert request.predicted_metric is not None and low <= request.predicted_metric <= high
        assert request.spec.budget == budget
        assert (request.config.epochs, request.config.max_train_rows) == (1.5, 400)
        assert request.config.max_steps is None
