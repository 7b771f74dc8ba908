"""Every real dataset the repository ships for tests (tests/support/data) profiles completely and
sanely; the script mix recognises each writing system."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain.profile import ProfileOptions
from tests.support.plugin import TEST_DATA

pytestmark = pytest.mark.slow  # profiles every shipped dataset


@pytest.mark.parametrize("name", sorted(p.name for p in TEST_DATA.glob("*.jsonl.gz")))
def test_profile_is_complete_and_in_range(name: str) -> None:
    result = profile_file(TEST_DATA / name, ProfileOptions(sample_size=512))
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


def _written(path: Path, texts: list[str]) -> Path:
    rows = [{"text": text, "label": str(i % 2)} for i, text in enumerate(texts)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def test_script_mix_reflects_the_language(tmp_path: Path) -> None:
    options = ProfileOptions(sample_size=64)
    russian = [
        "Мороз и солнце; день чудесный!",
        "Ещё ты дремлешь, друг прелестный.",
        "Пора, красавица, проснись.",
    ]
    chinese = [
        "知之为知之，不知为不知，是知也。",
        "学而不思则罔，思而不学则殆。",
        "三人行，必有我师焉。",
    ]
    features = {
        "cyrillic": profile_file(_written(tmp_path / "ru.jsonl", russian * 20), options).features,
        "ethiopic": profile_file(TEST_DATA / "afrisenti_amh.jsonl.gz", options).features,
        "cjk": profile_file(_written(tmp_path / "zh.jsonl", chinese * 20), options).features,
    }
    assert features["cyrillic"].script_mix["cyrillic"] > 0.7
    assert features["ethiopic"].script_mix["ethiopic"] > 0.7
    assert features["cjk"].script_mix["cjk"] > 0.4
