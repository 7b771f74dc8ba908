"""Every real dataset the team was given profiles completely and sanely."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from metatune_profiler.domain.profile import ProfileOptions, profile_file
from tests.support.plugin import shared_data_path

pytestmark = pytest.mark.slow  # profiles every dataset of the shared folder


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One case per dataset in the shared folder (``--shared-data``), listed at collection."""
    if "name" in metafunc.fixturenames:
        folder = shared_data_path(metafunc.config) / "text"
        metafunc.parametrize("name", sorted(p.name for p in folder.glob("*.jsonl.gz")))


def test_profile_is_complete_and_in_range(text_data: Path, name: str) -> None:
    result = profile_file(text_data / name, ProfileOptions(sample_size=512))
    f = result.features
    values = [v for v in f.model_dump().values() if isinstance(v, float)] + list(f.extra.values())
    assert all(math.isfinite(v) for v in values)
    assert result.rows_skipped == 0
    assert f.n_examples >= 1000 and f.sample_size == 512
    is_lm = name.startswith("lm_")
    assert (f.n_classes == 0) if is_lm else (f.n_classes >= 2 and f.imbalance_ratio >= 1)
    assert f.is_pair == (name in {"rte.jsonl.gz", "snli_subset.jsonl.gz"})
    assert 0 < f.ttr < f.mattr < 1  # at corpus scale, raw TTR is far below the windowed one
    assert f.zipf_alpha is not None and 1.3 < f.zipf_alpha < 3.5 and f.zipf_alpha_se < 0.2
    assert (
        f.words_p50 <= f.words_p95 <= f.words_max and f.tokens_p50 <= f.tokens_p95 <= f.tokens_max
    )
    assert (
        f.padding_fraction_grouped <= f.padding_fraction_random
    )  # equal when nearly all rows are truncated
    assert 0.9 < f.fertility < 6 and sum(f.script_mix.values()) == pytest.approx(1.0)
    assert f.vocab_size > 1000 and 0 < f.hapax_ratio < 1


def test_script_mix_reflects_the_language(text_data: Path) -> None:
    options = ProfileOptions(sample_size=64)
    assert (
        profile_file(text_data / "fortunes_ru.jsonl.gz", options).features.script_mix["cyrillic"]
        > 0.7
    )
    assert (
        profile_file(text_data / "afrisenti_amh.jsonl.gz", options).features.script_mix["ethiopic"]
        > 0.7
    )
    assert (
        profile_file(text_data / "lm_fortunes_zh.jsonl.gz", options).features.script_mix["cjk"]
        > 0.4
    )
