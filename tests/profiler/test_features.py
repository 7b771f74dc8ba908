"""Every meta-feature against values computed by hand on tiny inputs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain import stats
from metatune_profiler.domain.lexicon import words
from metatune_profiler.domain.profile import ProfileOptions
from metatune_profiler.domain.scripts import script_counts, script_mix

from .conftest import write_jsonl

ROWS = [
    {"text": "The cat sat.", "label": "a"},
    {"text": "the dog", "label": "b"},
    {"text": "The cat sat.", "label": "a"},
    {"text": "a b c d e f", "label": "a"},
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    path = write_jsonl(tmp_path_factory.mktemp("tiny") / "tiny.jsonl", ROWS)
    return profile_file(path, ProfileOptions(mattr_window=5)).features


def test_label_features(tiny) -> None:
    assert tiny.n_examples == 4
    assert tiny.n_classes == 2
    # p = (3/4, 1/4)
    assert tiny.label_entropy_bits == pytest.approx(
        -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    )
    assert tiny.label_entropy_norm == pytest.approx(0.811278, abs=1e-6)
    assert tiny.imbalance_ratio == 3.0


def test_word_lengths(tiny) -> None:
    # 3, 2, 3, 6 words; sorted 2 3 3 6
    assert tiny.words_mean == 3.5
    assert tiny.words_p50 == 3.0
    assert tiny.words_p95 == pytest.approx(3 + 0.85 * 3)  # position 0.95 * 3 = 2.85
    assert tiny.words_max == 6


def test_types_and_diversity(tiny) -> None:
    # 14 tokens; types the(3) cat(2) sat(2) dog a b c d e f (1 each): 10 types, 7 hapax
    assert tiny.vocab_size == 10
    assert tiny.ttr == pytest.approx(10 / 14)
    assert tiny.hapax_ratio == pytest.approx(7 / 10)
    # windows of 5 over "the cat sat the dog the cat sat a b c d e f": 4 windows with 4 types, 6 with 5
    assert tiny.mattr == pytest.approx((4 * 4 + 6 * 5) / (10 * 5))
    assert tiny.mattr_window == 5
    assert tiny.zipf_alpha is None  # far fewer than 50 types: no fit


def test_duplicates_scripts_pairs(tiny) -> None:
    assert tiny.duplicate_rate == 0.25
    # letters: thecatsat thedog thecatsat abcdef = 30, punctuation: two full stops
    assert tiny.script_mix == pytest.approx({"latin": 30 / 32, "punct_symbol": 2 / 32})
    assert tiny.is_pair is False


def test_tokenizer_features(tiny) -> None:
    # every word is one WordPiece of MiniLM's BERT vocabulary, "." one more, plus [CLS] and [SEP]:
    # 6, 4, 6, 8 tokens
    assert tiny.sample_size == 4
    assert tiny.tokens_mean == pytest.approx(6.0)
    assert tiny.tokens_p50 == 6.0
    assert tiny.tokens_max == 8
    assert tiny.unk_rate == 0.0
    assert tiny.fertility == pytest.approx((3 + 1 + 2 + 3 + 1 + 6) / 14)  # content tokens / words


def test_unknown_tokens_and_fertility(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "unk.jsonl", [{"text": "hello \u2603"}, {"text": "hello world"}])
    features = profile_file(path).features
    # "\u2603" (snowman) is [UNK] for MiniLM's uncased BERT vocabulary and not a word
    assert features.unk_rate == pytest.approx(1 / 4)
    assert features.fertility == pytest.approx(4 / 3)
    assert features.script_mix == pytest.approx({"latin": 15 / 16, "emoji": 1 / 16})


def test_pair_rows_are_tokenised_jointly(tmp_path: Path) -> None:
    rows = [
        {"premise": "a cat", "hypothesis": "a dog", "label": "no"},
        {"premise": "it is", "hypothesis": "it is", "label": "yes"},
    ]
    features = profile_file(write_jsonl(tmp_path / "pair.jsonl", rows)).features
    assert features.is_pair
    assert features.tokens_max == 2 + 2 + 3  # [CLS] a cat [SEP] a dog [SEP]
    assert features.words_mean == 4.0


def test_padding_fractions_by_hand() -> None:
    assert stats.padding_fraction_random([1, 3, 1, 3], batch_size=4, seed=0) == pytest.approx(
        1 - 8 / 12
    )
    assert stats.padding_fraction_grouped([1, 3, 1, 3], batch_size=2, seed=0) == 0.0
    assert stats.padding_fraction_grouped([2, 4, 4, 4], batch_size=2, seed=5) == pytest.approx(
        1 - 14 / 16
    )
    assert stats.padding_fraction_random([7], batch_size=32, seed=0) == 0.0


def test_grouping_never_pads_more_than_random() -> None:
    lengths = list(np.random.default_rng(3).integers(5, 300, size=5000))
    for batch in (8, 32):
        assert stats.padding_fraction_grouped(lengths, batch, 1) < stats.padding_fraction_random(
            lengths, batch, 1
        )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=200), st.floats(0, 1))
def test_histogram_quantile_matches_numpy(values: list[int], q: float) -> None:
    assert stats.histogram_quantile(stats.length_histogram(values), q) == pytest.approx(
        np.percentile(values, q * 100)
    )


def test_label_statistics_edge_cases() -> None:
    assert stats.label_entropy_bits({"a": 5, "b": 5, "c": 5, "d": 5}) == pytest.approx(2.0)
    assert stats.normalised_entropy({"a": 5, "b": 5, "c": 5, "d": 5}) == pytest.approx(1.0)
    assert stats.normalised_entropy({"a": 5}) == 0.0
    assert stats.imbalance_ratio({}) == 1.0


def test_words_definition() -> None:
    assert words("Don't STOP, it's 2024!") == ["don't", "stop", "it's", "2024"]
    assert words("我爱你 ok") == ["我", "爱", "你", "ok"]
    assert words("snake_case  -- \u2603") == ["snake", "case"]


def test_script_classes() -> None:
    counts = script_counts("Привет мир 123 ሰላም 你好 안녕 مرحبا")
    mix = script_mix(counts)
    total = 9 + 3 + 3 + 2 + 2 + 5
    assert mix == pytest.approx(
        {
            "cyrillic": 9 / total,
            "digit": 3 / total,
            "ethiopic": 3 / total,
            "cjk": 2 / total,
            "hangul": 2 / total,
            "arabic": 5 / total,
        }
    )
