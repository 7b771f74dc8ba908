"""Word segmentation across scripts: combining marks stay in their word, Thai is segmented.

The expected words below were counted by hand, one orthographic word at a time: for scripts
written with spaces (Devanagari, Arabic, Ethiopic) a word is what lies between spaces and
punctuation (the danda ``।``, the Ethiopic wordspace ``፡`` and full stop ``።``), clitics written
attached (Arabic ``ال``) staying in their word; for Thai, which has no spaces between words, a
word is a lexeme of the Royal Institute Dictionary, and the samples avoid compounds that the
dictionary also lists whole (``ตอนเช้า``), whose count would be a matter of convention.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metatune_profiler.adapters.files import profile_file
from metatune_profiler.domain.lexicon import ASCII_WORD, WORD, segment, words
from metatune_profiler.domain.profile import ProfileOptions

from .conftest import write_jsonl

# Hindi: 12 words. The vowel signs (ा ि ी ो ै ें, spacing marks Mc), anusvara / candrabindu (ं ँ, Mn)
# and virama are combining marks: a pattern of letters only would cut "हिंदी" into "ह" + "द".
HINDI = "भारत एक विशाल देश है और यहाँ कई भाषाएँ बोली जाती हैं।"
HINDI_WORDS = ["भारत", "एक", "विशाल", "देश", "है", "और", "यहाँ", "कई", "भाषाएँ", "बोली", "जाती", "हैं"]

# Arabic with full harakat (fatha, damma, kasra, sukun, tanwin: all Mn): 5 words.
ARABIC = "ذَهَبَ الوَلَدُ إِلَى المَدْرَسَةِ صَبَاحًا."
ARABIC_WORDS = ["ذَهَبَ", "الوَلَدُ", "إِلَى", "المَدْرَسَةِ", "صَبَاحًا"]

# Persian: the zero-width non-joiner inside "می‌خواهم" (prefix + verb) keeps it one word: 4 words.
PERSIAN = "من می\u200cخواهم کتاب بخوانم"
PERSIAN_WORDS = ["من", "می\u200cخواهم", "کتاب", "بخوانم"]

# Amharic: 2 words with a space, then 3 separated by the traditional wordspace ፡ (U+1361): 5 words.
AMHARIC = "ሰላም ለዓለም። ኢትዮጵያ፡ሀገሬ፡ናት።"
AMHARIC_WORDS = ["ሰላም", "ለዓለም", "ኢትዮጵያ", "ሀገሬ", "ናት"]

# Thai, no spaces between words:
#   ฉัน|รัก|แมว ("I love cats"): 3;  แม่|ไป|ตลาด|เมื่อวาน ("mother went to the market yesterday"): 4;
#   เด็ก ๆ|กำลัง|เล่น|ฟุตบอล|อยู่|ที่|สนาม ("the children are playing football at the field"): 7,
#   the repetition mark ๆ (written after a space, as the Royal Institute recommends) belongs to เด็ก.
THAI = {
    "ฉันรักแมว": ["ฉัน", "รัก", "แมว"],
    "แม่ไปตลาดเมื่อวาน": ["แม่", "ไป", "ตลาด", "เมื่อวาน"],
    "เด็ก ๆ กำลังเล่นฟุตบอลอยู่ที่สนาม": ["เด็กๆ", "กำลัง", "เล่น", "ฟุตบอล", "อยู่", "ที่", "สนาม"],
    "ฉันชอบ Python มาก": ["ฉัน", "ชอบ", "python", "มาก"],  # mixed scripts: 4
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HINDI, HINDI_WORDS),
        (ARABIC, ARABIC_WORDS),
        (PERSIAN, PERSIAN_WORDS),
        (AMHARIC, AMHARIC_WORDS),
        *THAI.items(),
    ],
    ids=["hindi", "arabic", "persian", "amharic", "thai-3", "thai-4", "thai-7", "thai-mixed"],
)
def test_hand_counted_words(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_marks_stay_in_their_word() -> None:
    assert (
        words("cafe\u0301 CAFÉ café") == ["café"] * 3
    )  # decomposed, upper-case, precomposed: one type
    assert all(any(unicodedata.category(c).startswith("M") for c in w) for w in ("हिंदी", "الوَلَدُ"))
    assert words("हिंदी") == ["हिंदी"] and words("الوَلَدُ") == ["الوَلَدُ"]


def test_ideographs_kana_and_unsegmented_scripts() -> None:
    assert words("我爱你 ok") == ["我", "爱", "你", "ok"]
    assert words("ガーデン・パーティー") == list(
        "ガーデンパーティー"
    )  # ・ is punctuation, ー a kana
    assert words("\U0002000bx") == ["\U0002000b", "x"]  # Han beyond the BMP (extension B)
    # Lao (like Khmer and Myanmar) has no segmenter: a run between spaces is one word
    assert words("ສະບາຍດີ ທຸກຄົນ") == ["ສະບາຍດີ", "ທຸກຄົນ"]
    assert words("\U0001f468\u200d\U0001f469\u200d\U0001f467 hi") == [
        "hi"
    ]  # emoji joined by ZWJ: not a word


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_fast_path_equals_the_unicode_pattern(text: str) -> None:
    assert ASCII_WORD.findall(text.lower()) == WORD.findall(text.lower()) == words(text)


MIXED = st.sampled_from(
    list("aZ9'\u2019_ -.\u0301\u0903\u093f\u094d\u064e\u200c\u200d\u00e9\u0131\u0130\u00b2\u2163")
    + list("हिदीअربيةሰላም我爱ガー・ไทยๆ\U0002000b\U0001f600")
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), st.text(alphabet=MIXED, max_size=60)))
def test_fast_paths_equal_the_definition(text: str) -> None:
    """Every shortcut of ``words`` (ASCII, no ideograph or Thai) gives what the full definition gives."""
    assert words(text) == segment(unicodedata.normalize("NFC", text).lower())


def test_profile_counts_hindi_and_thai_words(tmp_path: Path) -> None:
    """End to end: word counts, lengths and types of a profile follow the hand counts above."""
    rows = [
        {"text": HINDI, "label": "hi"},
        {"text": HINDI, "label": "hi"},
        {"text": "ฉันรักแมว", "label": "th"},
        {"text": "แม่ไปตลาดเมื่อวาน", "label": "th"},
    ]
    features = profile_file(
        write_jsonl(tmp_path / "mixed.jsonl", rows), ProfileOptions(sample_size=8)
    ).features
    assert features.extra["word_tokens"] == 12 + 12 + 3 + 4
    assert features.words_max == 12
    assert features.vocab_size == 12 + 3 + 4  # แม่ and แมว are different words
    assert features.ttr == pytest.approx(19 / 31)
