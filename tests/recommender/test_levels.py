"""A new dataset's accuracy level read through its label probe (``domain/levels.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from metatune.knowledge.records import KbRun
from metatune_recommender.domain.history import feature_descriptors
from metatune_recommender.domain.levels import probed_weights, shifted
from metatune_recommender.domain.prior_settings import PriorSettings
from metatune_recommender.domain.recommender import Recommender, profile_descriptors
from tests.support.synthetic_kb import levelled_kb

from .synthetic import features

FAST = PriorSettings(iterations=60)
BASE = "all-MiniLM-L6-v2"


def test_each_level_moves_by_the_slope_of_the_values_on_the_probes() -> None:
    probes = np.array([0.2, 0.4, 0.6, np.nan])
    values = np.array([0.3, 0.5, 0.7, 0.9])  # slope 1 over the probed three
    moved = shifted(values, probes, 0.5)
    assert moved[:3] == pytest.approx([0.6, 0.6, 0.6])
    assert np.isnan(moved[3])  # no probe: it says nothing of the study's level
    assert probed_weights(np.array([0.1, 0.2, 0.3, 0.4]), probes) == pytest.approx(
        [1 / 6, 2 / 6, 3 / 6, 0]
    )
    falling = shifted(np.array([0.7, 0.5, 0.3]), probes[:3], 0.5)  # a negative slope is not taken
    assert falling == pytest.approx([0.7, 0.5, 0.3])


def test_the_probe_is_not_a_descriptor_of_similarity() -> None:
    described = features(1500).model_copy(update={"probe_accuracy": 0.7}).model_dump()
    assert "probe_accuracy" not in feature_descriptors(described)


def test_a_dataset_whose_probe_is_higher_is_predicted_higher_and_held_out_errors_shrink() -> None:
    recommender = Recommender(levelled_kb(probed=True), settings=FAST)
    predictions = {}
    for probe in (0.35, 0.85):
        profile = features(1500).model_copy(update={"probe_accuracy": probe})
        advice = recommender.recommend(BASE, profile_descriptors(profile))
        predictions[probe] = [rec.predicted for rec in advice.recommendations]
        assert all(p is not None for p in predictions[probe])
        assert not any("probe_accuracy" in key for key in advice.imputed)
    assert min(predictions[0.85]) > max(predictions[0.35]) + 0.3

    def held_out_error(runs: list[KbRun]) -> float:
        held = Recommender(runs, settings=FAST).held_out_predictions(BASE)
        return float(np.mean([abs(a - p) for rows in held.values() for a, p, _ in rows]))

    with_probe, without = (
        held_out_error(levelled_kb(probed=True)),
        held_out_error(levelled_kb(probed=False)),
    )
    assert with_probe < without / 2


def test_a_scorer_cached_before_the_probes_is_not_read_after_them() -> None:
    """The interval factor kept with a scorer was calibrated through the probes it saw."""
    before = Recommender(levelled_kb(probed=False), settings=FAST).scorer_key(BASE)
    after = Recommender(levelled_kb(probed=True), settings=FAST).scorer_key(BASE)
    assert before != after


def test_a_study_without_a_probe_is_predicted_and_bounded_as_before_the_probes() -> None:
    """No probe on the study: the scales are read unmoved, with the factor calibrated that way."""
    profile = profile_descriptors(features(1500))  # no probe_accuracy
    probed = Recommender(levelled_kb(probed=True), settings=FAST)
    unprobed = Recommender(levelled_kb(probed=False), settings=FAST)
    with_probes = probed.recommend(BASE, profile).recommendations
    without = unprobed.recommend(BASE, profile).recommendations
    assert [(r.predicted, r.interval) for r in with_probes] == [
        (r.predicted, r.interval) for r in without
    ]
    assert probed.interval_factor(BASE, probed=False) == unprobed.interval_factor(BASE)
    assert probed.interval_factor(BASE, probed=False) != probed.interval_factor(BASE)
