"""The pre-result path's NumPy scorer: the torch path's top-k and predictions, kept on disk beside
the fitted prior, read back without torch, rebuilt when the knowledge base changes or the file
is torn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from metatune_recommender.adapters.prior_cache import PriorCache
from metatune_recommender.domain.acquisition import select_batch
from metatune_recommender.domain.history import feature_descriptors
from metatune_recommender.domain.prior import PriorSettings
from metatune_recommender.domain.recommender import (
    KNOWLEDGE_BASE,
    Recommender,
    impute,
    profile_descriptors,
)

from .synthetic import profile, two_kinds_kb

FAST = PriorSettings(iterations=60)
BASE = "all-MiniLM-L6-v2"
PROFILES = [
    profile_descriptors(profile("intents", 0.02, n_examples=600)),
    profile_descriptors(profile("reviews", 0.05, n_examples=1500)),
]


def _scorers(root: Path) -> list[Path]:
    return sorted(root.glob("scorer-*.pickle"))


@pytest.mark.parametrize("settings", [FAST, PriorSettings(iterations=60, source_overlap=0.0)])
def test_the_scorer_predicts_and_picks_as_the_torch_prior(settings: PriorSettings) -> None:
    recommender = Recommender(two_kinds_kb(), settings=settings)
    prior = recommender.prior(BASE)
    scorer = recommender.scorer(BASE)
    assert scorer is not None
    history = recommender.history(BASE)
    for raw in PROFILES:
        descriptors, _ = impute(feature_descriptors(raw), history)
        x_torch = prior.inputs(scorer.scored, descriptors)
        x_numpy = scorer.inputs(scorer.scored, descriptors)
        np.testing.assert_allclose(x_numpy, x_torch.numpy(), rtol=0, atol=0)
        torch_means, torch_sds = prior.source_predictions(x_torch)
        numpy_means, numpy_sds = scorer.source_predictions(x_numpy)
        np.testing.assert_allclose(numpy_means, torch_means, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(numpy_sds, torch_sds, rtol=1e-9, atol=1e-9)
        by_torch = select_batch(prior.condition(descriptors, [], [], x_torch), x_torch, 3)
        by_numpy = select_batch(scorer.condition(descriptors, [], [], x_numpy), x_numpy, 3)
        assert [p.index for p in by_numpy] == [p.index for p in by_torch]
        for a, b in zip(by_numpy, by_torch, strict=True):
            assert a.mean == pytest.approx(b.mean, rel=1e-9, abs=1e-9)
            assert a.std == pytest.approx(b.std, rel=1e-9, abs=1e-9)
            assert a.ei == pytest.approx(b.ei, rel=1e-9, abs=1e-9)


def test_fantasised_picks_condition_as_the_torch_posterior() -> None:
    """The Kriging-believer fantasies of a batch: the scorer's GP posterior is the torch one."""
    recommender = Recommender(two_kinds_kb(), settings=FAST)
    prior, scorer = recommender.prior(BASE), recommender.scorer(BASE)
    assert scorer is not None
    descriptors, _ = impute(feature_descriptors(PROFILES[0]), recommender.history(BASE))
    x_torch = prior.inputs(scorer.scored, descriptors)
    x_numpy = scorer.inputs(scorer.scored, descriptors)
    by_torch = prior.condition(descriptors, [], [], x_torch)
    by_numpy = scorer.condition(descriptors, [], [], x_numpy)
    for index, z in ((3, 0.4), (17, -0.2), (40, 1.1)):
        by_torch = by_torch.with_observation(x_torch[index], z)
        by_numpy = by_numpy.with_observation(x_numpy[index], z)
    mu_t, sd_t = by_torch.predict_inputs(x_torch)
    mu_n, sd_n = by_numpy.predict_inputs(x_numpy)
    np.testing.assert_allclose(mu_n, mu_t, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(sd_n, sd_t, rtol=1e-8, atol=1e-8)


def test_a_second_recommender_reads_the_scorer_and_answers_the_same(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    first = Recommender(runs, settings=FAST, store=PriorCache(tmp_path))
    advice = first.recommend(BASE, PROFILES[0])
    (kept,) = _scorers(tmp_path)
    assert kept.stat().st_mode & 0o077 == 0
    second = Recommender(runs, settings=FAST, store=PriorCache(tmp_path))
    again = second.recommend(BASE, PROFILES[0])
    assert second._priors == {}  # answered from the scorer: no prior read, nothing fitted
    assert again.as_dict() == advice.as_dict()


def test_a_changed_knowledge_base_makes_its_own_scorer(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    advice = Recommender(runs, settings=FAST, store=PriorCache(tmp_path)).recommend(
        BASE, PROFILES[0]
    )
    fewer = Recommender(runs[:-1], settings=FAST, store=PriorCache(tmp_path))
    assert fewer.scorer_key(BASE) != Recommender(runs, settings=FAST).scorer_key(BASE)
    assert fewer.recommend(BASE, PROFILES[0]).source == advice.source == KNOWLEDGE_BASE
    assert len(_scorers(tmp_path)) == 2
    assert fewer._priors  # its prior was fitted (or read) anew, not the other base's scorer used


def test_other_settings_make_their_own_scorer(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    a = Recommender(runs, settings=FAST, store=PriorCache(tmp_path))
    b = Recommender(runs, settings=FAST, candidates=64, store=PriorCache(tmp_path))
    assert a.scorer_key(BASE) != b.scorer_key(BASE)


def test_a_torn_scorer_file_is_rebuilt(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    advice = Recommender(runs, settings=FAST, store=PriorCache(tmp_path)).recommend(
        BASE, PROFILES[1]
    )
    (kept,) = _scorers(tmp_path)
    size = kept.stat().st_size
    kept.write_bytes(kept.read_bytes()[: size // 3])
    again = Recommender(runs, settings=FAST, store=PriorCache(tmp_path)).recommend(
        BASE, PROFILES[1]
    )
    assert again.as_dict() == advice.as_dict()
    (replaced,) = _scorers(tmp_path)
    assert replaced.stat().st_size > size // 3
    key = Recommender(runs, settings=FAST).scorer_key(BASE)
    assert PriorCache(tmp_path).load_scorer(key) is not None


def test_a_kept_scorer_answers_without_importing_torch(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    recommender = Recommender(runs, settings=FAST, store=PriorCache(tmp_path))
    expected = recommender.recommend(BASE, PROFILES[0]).as_dict()
    kb = tmp_path / "runs.json"
    kb.write_text(json.dumps([r.model_dump(mode="json") for r in runs]))
    script = f"""
import json, sys
from pathlib import Path
from metatune.knowledge.records import KbRun
from metatune_recommender.adapters.prior_cache import PriorCache
from metatune_recommender.domain.prior_settings import PriorSettings
from metatune_recommender.domain.recommender import Recommender
runs = [KbRun.model_validate(r) for r in json.loads(Path({str(kb)!r}).read_text())]
recommender = Recommender(runs, settings=PriorSettings(iterations=60), store=PriorCache(Path({str(tmp_path)!r})))
advice = recommender.recommend({BASE!r}, json.loads({json.dumps(json.dumps(PROFILES[0]))}))
print(json.dumps({{"torch": "torch" in sys.modules, "gpytorch": "gpytorch" in sys.modules,
                  "advice": advice.as_dict()}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["torch"] is False and result["gpytorch"] is False
    assert result["advice"] == json.loads(json.dumps(expected))
