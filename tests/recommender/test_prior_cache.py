"""Fitted priors kept on disk: a second process with the same knowledge base reads the prior the
first one fitted instead of fitting it again; another knowledge base, or a torn file, fits anew."""

from __future__ import annotations

import stat
from pathlib import Path

from metatune_recommender.adapters.prior_cache import PriorCache
from metatune_recommender.domain.fitted import prior_key
from metatune_recommender.domain.prior import PriorSettings
from metatune_recommender.domain.recommender import KNOWLEDGE_BASE, Recommender, profile_descriptors

from .synthetic import profile, two_kinds_kb

FAST = PriorSettings(iterations=60)
BASE = "all-MiniLM-L6-v2"
INTENTS = profile_descriptors(profile("intents", 0.02, n_examples=600))


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("prior-*.pickle"))


def test_a_second_recommender_reads_the_prior_the_first_one_fitted(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    root = tmp_path / "priors"
    first = Recommender(runs, settings=FAST, store=PriorCache(root))
    advice = first.recommend(BASE, INTENTS)
    assert advice.source == KNOWLEDGE_BASE
    (kept,) = _files(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700  # pickles run code: the service's own
    assert stat.S_IMODE(kept.stat().st_mode) & 0o077 == 0
    # mark the kept prior, so that reading it back is visible in what the next process gets
    marked = first.prior(BASE)
    marked.final_loss = -12345.0
    PriorCache(root).save(first.prior_key(BASE), marked)

    second = Recommender(runs, settings=FAST, store=PriorCache(root))
    assert second.prior(BASE).final_loss == -12345.0
    again = second.recommend(BASE, INTENTS)
    assert [r.config for r in again.recommendations] == [r.config for r in advice.recommendations]


def test_another_knowledge_base_fits_its_own_prior(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    Recommender(runs, settings=FAST, store=PriorCache(tmp_path)).prior(BASE)
    Recommender(runs[:-1], settings=FAST, store=PriorCache(tmp_path)).prior(BASE)
    assert len(_files(tmp_path)) == 2


def test_a_torn_file_is_fitted_again_and_replaced(tmp_path: Path) -> None:
    runs = two_kinds_kb()
    Recommender(runs, settings=FAST, store=PriorCache(tmp_path)).prior(BASE)
    (kept,) = _files(tmp_path)
    kept.write_bytes(kept.read_bytes()[:100])
    advice = Recommender(runs, settings=FAST, store=PriorCache(tmp_path)).recommend(BASE, INTENTS)
    assert advice.source == KNOWLEDGE_BASE and advice.error is None
    (replaced,) = _files(tmp_path)
    assert replaced.stat().st_size > 100
    assert PriorCache(tmp_path).load(prior_key([], FAST, [])) is None  # a key never kept
