"""A model trained on a small slice of the real traces beats seasonal-naive on a later slice, and
what it learns does not depend on anything at or after its split."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from metatune_forecaster.adapters.carbon_folder import load_carboncast, load_em
from metatune_forecaster.adapters.model_files import load_model, load_weather_error, save_model
from metatune_forecaster.adapters.package_data import WEATHER_ERROR_PATH
from metatune_forecaster.domain.baselines import seasonal_naive_24h, seasonal_naive_168h
from metatune_forecaster.domain.evaluation import mape, wmape
from metatune_forecaster.domain.features import RegionArrays
from metatune_forecaster.domain.model import (
    LEVEL_FEATURES,
    CarbonModel,
    ModelArtifactError,
    block_features,
)
from metatune_forecaster.domain.samples import build_grid, issue_positions
from metatune_forecaster.domain.series import RegionSeries
from metatune_forecaster.tools import train as train_module
from metatune_forecaster.tools.train import train
from tests.support.plugin import TEST_DATA

TRAIN_UNTIL = pd.Timestamp("2022-04-01", tz="UTC")
TEST_FROM, TEST_UNTIL = pd.Timestamp("2022-04-01", tz="UTC"), pd.Timestamp("2022-07-01", tz="UTC")


@pytest.fixture(scope="module")
def trained() -> tuple[CarbonModel, list]:
    carbon = TEST_DATA / "carbon"
    start = pd.Timestamp("2021-04-01", tz="UTC")
    series = [
        load_em(carbon, "DE").slice(start, TEST_UNTIL),
        load_em(carbon, "US-TEX-ERCO").slice(start, TEST_UNTIL),
        load_carboncast(carbon, "CISO").slice(start, TEST_UNTIL),
    ]
    error_model = load_weather_error(WEATHER_ERROR_PATH)
    model = train(  # the smallest ensemble that is one (two members): a third less CPU than three
        series,
        TRAIN_UNTIL,
        error_model,
        max_iter=40,
        strides_h=(19, 29, 29),
        leads_per_issue=12,
        ensemble_size=2,
    )
    return model, series


def poisoned(series: RegionSeries, start: pd.Timestamp) -> RegionSeries:
    """``series`` with every value at or after ``start`` (intensity and weather) changed: finite
    and far off, so any use of them moves a fitted tree or the interval table."""
    frame = series.frame.copy()
    later = frame.index >= start
    frame.loc[later] = frame.loc[later] * 10 + 1000
    return dataclasses.replace(series, frame=frame)


def leaks_into_training(series: list[RegionSeries], train_until: pd.Timestamp) -> list[str]:
    """What of the model changes when everything from ``train_until`` on is poisoned: empty when
    training is blind to the test period. Both fits use the same seed, so a model that never
    reads those hours is reproduced exactly."""

    def fit(data: list[RegionSeries]) -> CarbonModel:
        return train(
            data,
            train_until,
            load_weather_error(WEATHER_ERROR_PATH),
            max_iter=3,
            strides_h=(71, 71, 71),
            leads_per_issue=4,
            ensemble_size=2,
        )

    clean = fit(series)
    dirty = fit([poisoned(s, train_until) for s in series])
    arrays = RegionArrays(series[0])
    grid = build_grid(
        arrays,
        issue_positions(arrays, train_until, None, 97),
        load_weather_error(WEATHER_ERROR_PATH),
        np.random.default_rng(1),
    )
    changed = [
        f"block {b} predictions"
        for b, (a, z) in enumerate(
            zip(clean.predict(grid.features), dirty.predict(grid.features), strict=True)
        )
        if not np.array_equal(a, z)
    ]
    if not np.array_equal(clean.interval, dirty.interval):
        changed.append("interval table")
    return changed


@pytest.fixture(scope="module")
def split_slice() -> list[RegionSeries]:
    """Four months of DE: ten weeks before the split, the rest after."""
    carbon = TEST_DATA / "carbon"
    start, end = pd.Timestamp("2022-01-15", tz="UTC"), pd.Timestamp("2022-06-01", tz="UTC")
    return [load_em(carbon, "DE").slice(start, end)]


def test_training_never_sees_the_test_period(split_slice: list[RegionSeries]) -> None:
    assert leaks_into_training(split_slice, TRAIN_UNTIL) == []


def test_the_leak_check_catches_issues_whose_horizon_crosses_the_split(
    split_slice: list[RegionSeries], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The classic leak: issues stop at the split, but their 168 h of targets run past it."""
    honest = train_module.issue_positions

    def leaking(arrays, start, end, stride_h):
        return honest(
            arrays, start, None if end is None else end + pd.Timedelta(hours=168), stride_h
        )

    monkeypatch.setattr(train_module, "issue_positions", leaking)
    assert leaks_into_training(split_slice, TRAIN_UNTIL) != []


@pytest.mark.slow  # uses the model fitted on a year of three regions
def test_the_model_records_its_split(trained: tuple[CarbonModel, list]) -> None:
    model, _ = trained
    assert pd.Timestamp(model.metadata["train_until"]) == TRAIN_UNTIL
    assert model.version.startswith("hgb-blocks-20220401")


@pytest.mark.slow  # uses the model fitted on a year of three regions
def test_small_model_beats_seasonal_naive_on_its_test_slice(
    trained: tuple[CarbonModel, list],
) -> None:
    model, series = trained
    error_model = load_weather_error(WEATHER_ERROR_PATH)
    predicted, actual, naive24, naive168, lead = [], [], [], [], []
    for one in series:
        arrays = RegionArrays(one)
        issues = issue_positions(arrays, TEST_FROM, TEST_UNTIL, 25)
        assert len(issues) > 40
        grid = build_grid(arrays, issues, error_model, np.random.default_rng(1))
        _, mid, _ = model.predict(grid.features)
        predicted.append(mid * grid.scale())
        actual.append(grid.actual())
        naive24.append(seasonal_naive_24h(arrays.y, grid.issue, grid.lead))
        naive168.append(seasonal_naive_168h(arrays.y, grid.issue, grid.lead))
        lead.append(grid.lead)
    predicted, actual, naive24, naive168, lead = map(
        np.concatenate, (predicted, actual, naive24, naive168, lead)
    )
    day = lead <= 24
    assert mape(predicted[day], actual[day]) < mape(naive24[day], actual[day])
    assert mape(predicted, actual) < min(mape(naive24, actual), mape(naive168, actual))
    assert wmape(predicted, actual) < min(wmape(naive24, actual), wmape(naive168, actual))


@pytest.mark.slow  # uses the model fitted on a year of three regions
def test_each_block_averages_members_fitted_on_other_feature_draws(
    trained: tuple[CarbonModel, list],
) -> None:
    model, series = trained
    grid = build_grid(
        RegionArrays(series[0]),
        issue_positions(RegionArrays(series[0]), TEST_FROM, TEST_UNTIL, 25)[:3],
        load_weather_error(WEATHER_ERROR_PATH),
        np.random.default_rng(2),
        lead_range=(1, 24),
    )
    block = model.blocks[0]
    x = grid.features[list(block.feature_names_in_)]
    members = np.array([member.predict(x) for member in block.members])
    assert len(block.members) == model.metadata["ensemble"]["size"] > 1
    assert not np.allclose(members[0], members[1])  # different feature draws, different trees
    np.testing.assert_allclose(block.predict(x), members.mean(axis=0))


@pytest.mark.slow  # uses the model fitted on a year of three regions
def test_each_block_sees_its_own_features_and_a_model_of_another_layout_is_refused(
    trained, tmp_path
) -> None:
    model, _ = trained
    assert [list(trees.feature_names_in_) for trees in model.blocks] == [
        block_features(b) for b in range(3)
    ]
    assert set(block_features(1)) >= LEVEL_FEATURES and not LEVEL_FEATURES & set(block_features(0))
    mixed = dataclasses.replace(
        model, blocks=[model.blocks[1], *model.blocks[1:]]
    )  # day-ahead trees of the wrong layout
    save_model(mixed, tmp_path / "mixed.joblib")
    with pytest.raises(ModelArtifactError, match="other features"):
        load_model(tmp_path / "mixed.joblib")
