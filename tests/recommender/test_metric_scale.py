"""Predictions stay inside the metric's range (an accuracy of 1.287 was published once)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metatune_recommender.domain.metric_scale import MetricScale, metric_scale
from metatune_recommender.domain.prior import PriorSettings
from metatune_recommender.domain.recommender import (
    Recommender,
    feature_descriptors,
    impute,
    profile_descriptors,
)

from .synthetic import features, kb_runs

MODEL = "all-MiniLM-L6-v2"


@given(z=st.floats(-1e6, 1e6), sd=st.floats(0, 1e3))
def test_every_model_value_maps_into_the_range(z: float, sd: float) -> None:
    for name, low, high in (("accuracy", 0, 1), ("bleu", 0, 100)):
        predicted, half_width = metric_scale(name).interval(z, sd)
        assert low <= predicted <= high and 0 <= half_width <= (high - low) / 2
    assert metric_scale("neg_perplexity").to_metric(z) <= -1.0
    assert metric_scale("neg_val_loss").to_metric(z) <= 0.0


@given(value=st.floats(0.01, 0.99))
def test_results_round_trip_through_the_model_scale(value: float) -> None:
    scale = metric_scale("accuracy")
    assert scale.to_metric(scale.to_model(value)) == pytest.approx(value)
    assert metric_scale("unknown-metric") == MetricScale()  # identity where no range is known


@pytest.fixture(scope="module")
def study() -> tuple[Recommender, dict, list[dict]]:
    recommender = Recommender(kb_runs(), settings=PriorSettings(iterations=150))
    profile = profile_descriptors(features(3000))
    first = recommender.recommend(MODEL, profile)
    return recommender, profile, [r.config.model_dump(mode="json") for r in first.recommendations]


@settings(max_examples=8, deadline=None)
@given(values=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=3))
def test_predictions_after_results_stay_within_accuracy(study, values: list[float]) -> None:
    recommender, profile, configs = study
    observed = list(zip(configs, values, strict=False))
    advice = recommender.recommend(MODEL, profile, observed=observed)
    for rec in advice.recommendations:
        assert rec.predicted is not None and rec.std is not None
        assert 0.0 <= rec.predicted <= 1.0 and 0.0 <= rec.std <= 0.5


def test_an_extrapolating_map_is_read_on_the_logit_scale(study) -> None:
    """The affine map of two close results extrapolates: in accuracy units it passed 1 (the demo's
    1.287); read on the logit scale the same posterior stays below 1."""
    recommender, profile, configs = study
    history = recommender.history(MODEL)
    prior = recommender.prior(MODEL)
    descriptors, _ = impute(feature_descriptors(profile), history)
    budget = recommender.reference(MODEL)
    taken = [recommender.at_reference(c, budget) for c in configs[:2]]
    scale = metric_scale("accuracy")
    linear = prior.condition(descriptors, taken, [0.70, 0.733])
    posterior = prior.condition(descriptors, taken, [scale.to_model(0.70), scale.to_model(0.733)])
    mu, sd = posterior.predict_inputs(prior.inputs(taken, descriptors))
    far = float(np.max(mu)) + 6.0  # a candidate six prior units above both results
    assert linear.a + linear.b * far > 1.0  # what the map in accuracy units published
    predicted, half_width = Recommender._to_metric(
        far, float(sd[0]), posterior, history, np.ones(1)
    )
    assert 0.733 < predicted < 1.0 and 0.0 <= half_width < 0.5
