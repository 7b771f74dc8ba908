"""The history portfolio the opening batch starts from (``domain/portfolio.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from metatune_recommender.domain.portfolio import portfolio_scores
from metatune_recommender.domain.prior_settings import PriorSettings


def test_a_measured_configuration_scores_the_mean_of_its_normal_scores() -> None:
    rows = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    first, second = np.array([1.5, -0.5, 0.0]), np.array([0.5, 0.5, -1.0])
    scores = portfolio_scores(rows, [(rows, first), (rows, second)])
    np.testing.assert_allclose(scores, (first + second) / 2)
    assert int(np.argmax(scores)) == 0


def test_weights_move_the_average_toward_the_similar_task() -> None:
    rows = np.array([[0.0], [1.0]])
    likes_low, likes_high = np.array([1.0, -1.0]), np.array([-1.0, 1.0])
    sources = [(rows, likes_low), (rows, likes_high)]
    assert portfolio_scores(rows, sources, np.array([0.8, 0.2]))[0] > 0
    assert portfolio_scores(rows, sources, np.array([0.2, 0.8]))[1] > 0


def test_a_measured_row_ranks_above_an_unmeasured_neighbour_reading_the_same_rows() -> None:
    rows = np.array([[0.0], [1.0]])
    candidates = np.array([[0.1], [0.0], [0.9]])  # a Sobol point beside the best row comes first
    scores = portfolio_scores(candidates, [(rows, np.array([1.0, -1.0]))])
    assert int(np.argmax(scores)) == 1 and scores[0] < scores[1]


def test_no_source_scores_nothing() -> None:
    assert not portfolio_scores(np.zeros((3, 2)), []).any()


def test_an_unknown_opening_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="portfolio"):
        PriorSettings(opening="best-guess")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="opening_spare"):
        PriorSettings(opening_spare=-1)
