"""The 80 % intervals a recommendation publishes and the word it gives when nothing is near."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from metatune.knowledge.records import DatasetInfo
from metatune_recommender.adapters.prior_cache import PriorCache
from metatune_recommender.domain.intervals import Z80, conformal_factor, interval
from metatune_recommender.domain.prior_settings import PriorSettings
from metatune_recommender.domain.recommender import Recommender, profile_descriptors
from tests.support.cli import run

from .synthetic import design, features, kb_run, kb_runs, profile, score

FAST = PriorSettings(iterations=60)
BASE = "all-MiniLM-L6-v2"


def test_the_conformal_factor_covers_the_share_asked_for() -> None:
    rng = np.random.default_rng(0)
    stds = rng.uniform(0.05, 0.2, 400)
    residuals = rng.normal(0, 1, 400) * stds * 2.0  # the stds are half what they should be
    factor = conformal_factor(residuals, stds)
    assert factor is not None and factor == pytest.approx(2.0 * Z80, rel=0.15)
    inside = np.abs(residuals) <= factor * stds
    assert 0.8 <= inside.mean() <= 0.83
    assert conformal_factor([], []) is None
    assert interval(0.9, 0.1, 1.5, 0.0, 1.0) == (0.75, 1.0)  # clipped at the metric's top


def test_every_recommendation_holds_its_prediction_in_a_calibrated_interval(
    tmp_path: Path,
) -> None:
    runs = kb_runs(datasets=4)
    recommender = Recommender(runs, settings=FAST, store=PriorCache(tmp_path))
    advice = recommender.recommend(BASE, profile_descriptors(features(1500)))
    factor = recommender.interval_factor(BASE, probed=False)  # the profile has no label probe
    assert factor != Z80  # measured on the history, leaving each task out
    for rec in advice.recommendations:
        assert rec.interval is not None and rec.predicted is not None and rec.std is not None
        low, high = rec.interval
        assert 0.0 <= low <= rec.predicted <= high <= 1.0
        assert high - low <= 2 * factor * rec.std + 1e-3
        assert rec.reason
    # kept with the scorer: another process reads the factor instead of measuring it again
    again = Recommender(runs, settings=FAST, store=PriorCache(tmp_path))
    scorer = again.scorer(BASE)
    assert scorer is not None and scorer.interval_factors[False] == factor


def test_a_dataset_unlike_every_known_one_is_told_there_is_no_close_evidence() -> None:
    runs = [
        kb_run(f"intents:{d}:{i}", dataset, config, score(config), BASE)
        for d in range(5)
        for dataset in [DatasetInfo(name=f"intents{d}", features=profile("intents", 0.03 * d))]
        for i, config in enumerate(design(16, seed=d))
    ]
    recommender = Recommender(runs, settings=FAST)
    near = recommender.recommend(BASE, profile_descriptors(profile("intents", 0.05)))
    assert near.evidence is None
    far = recommender.recommend(BASE, profile_descriptors(profile("sentiment", 0.0)))
    assert far.evidence is not None and far.evidence.startswith("no close evidence")
    assert "portfolio's choice" in far.evidence


def test_recommend_takes_the_budget_and_says_why_each_pick_is_there(tmp_path: Path) -> None:
    profiled = tmp_path / "profile.json"
    profiled.write_text(json.dumps({"features": features(800).model_dump(mode="json")}))
    env = {**os.environ, "METATUNE_DATA_DIR": str(tmp_path / "data")}
    shown = run(["recommend", str(profiled), "--epochs", "1", "--json"], env)
    assert shown.returncode == 0, shown.stderr
    advice = json.loads(shown.stdout)
    for rec in advice["recommendations"]:
        assert (rec["config"]["epochs"], rec["config"]["max_train_rows"]) == (1.0, 1000)
        assert rec["reason"] and len(rec["interval"]) == 2
    table = run(["recommend", str(profiled), "--max-steps", "200"], {**env, "COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    assert "each trains 200 steps over at most 1,000 rows" in table.stdout
    assert "1: " in table.stdout and "predicted (80 %)" in table.stdout
    both = run(["recommend", str(profiled), "--epochs", "1", "--max-steps", "9"], env)
    assert both.returncode == 2 and "not both" in both.stderr
    assert len(both.stderr.strip().splitlines()) == 1
