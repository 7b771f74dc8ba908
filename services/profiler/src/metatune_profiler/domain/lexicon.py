"""Words, word types and lexical diversity, computed in one streaming pass.

A *word* is a maximal run of letters, combining marks and digits (``\\p{L}``, ``\\p{M}``,
``\\p{N}``, with the zero-width (non-)joiners inside it), after NFC normalisation and
lower-casing, with internal apostrophes kept (``don't``). Marks belong to the word they are
written in, so Devanagari vowel signs, Arabic harakat or a decomposed accent never split a
word. Scripts written without spaces:

* Han / kana: each ideograph (or kana) is a word of its own;
* Thai: segmented with PyThaiNLP's dictionary maximal matching (``newmm``), the de-facto
  standard Thai word segmenter; ``ๆ`` (repetition mark) stays with the word it repeats;
* Lao, Khmer, Myanmar and other scripts without word spaces: no segmenter, so a run between
  spaces / punctuation counts as one word (it under-counts words; said in the README).

Punctuation, symbols and emoji are not words.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
import regex

_IDEOGRAPH = r"[\p{Han}\p{Hiragana}\p{Katakana}\u30fc]"  # ー (U+30FC) lengthens kana: a kana itself
_LETTER = r"[\p{L}\p{M}\p{N}--\p{Han}\p{Hiragana}\p{Katakana}\u30fc\p{Thai}]"
_INNER = r"[\p{L}\p{M}\p{N}\u200c\u200d--\p{Han}\p{Hiragana}\p{Katakana}\u30fc\p{Thai}]"
WORD = regex.compile(
    rf"(?V1){_IDEOGRAPH}\p{{M}}*"  # an ideograph with its marks (variation selectors, voicing marks)
    r"|\p{Thai}[\p{Thai}\p{M}]*"  # a Thai run, segmented by thai_words
    rf"|{_LETTER}{_INNER}*(?:['\u2019]{_LETTER}{_INNER}*)*"
)
_REPEAT = "\u0e46"  # ๆ: repeats the word before it

# Faster paths, equal to WORD where they apply (property-tested): WORD's set differences make the
# regex engine ~2x slower than plain classes, and most text has no ideograph or Thai letter.
ASCII_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")  # on ASCII text, with the faster re engine
PLAIN_WORD = regex.compile(
    r"[\p{L}\p{M}\p{N}][\p{L}\p{M}\p{N}\u200c\u200d]*(?:['\u2019][\p{L}\p{M}\p{N}][\p{L}\p{M}\p{N}\u200c\u200d]*)*"
)


def _covering_class(pattern: str, slack: int = 0x100) -> re.Pattern[str]:
    """A stdlib ``re`` class of every code point ``pattern`` (a regex class) matches, plus gaps of
    under ``slack`` between them: a superset with few ranges, which ``re`` scans fast."""
    code_points = np.concatenate([np.arange(0xD800), np.arange(0xE000, 0x110000)]).astype("<u4")
    every = code_points.tobytes().decode("utf-32-le")  # every scalar value, surrogates excluded
    points = code_points[[m.start() for m in regex.finditer(pattern, every)]].astype(np.int64)
    breaks = np.flatnonzero(np.diff(points) > slack)
    firsts, lasts = points[np.r_[0, breaks + 1]], points[np.r_[breaks, points.size - 1]]
    return re.compile(
        "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in zip(firsts, lasts, strict=True)) + "]"
    )


# Text with none of these code points has no ideograph or Thai letter: PLAIN_WORD is WORD there.
_MAYBE_SPACELESS = _covering_class(r"[\p{Han}\p{Hiragana}\p{Katakana}\u30fc\p{Thai}]")


def words(text: str) -> list[str]:
    """The lower-cased words of ``text``."""
    if text.isascii():
        return ASCII_WORD.findall(text.lower())
    text = unicodedata.normalize("NFC", text).lower()
    if not _MAYBE_SPACELESS.search(text):
        return PLAIN_WORD.findall(text)
    return segment(text)


def segment(text: str) -> list[str]:
    """The words of NFC, lower-cased ``text`` by the definition itself (WORD, then Thai runs split)."""
    out: list[str] = []
    for word in WORD.findall(text):
        if word == _REPEAT and out:  # "เด็ก ๆ", spaced as the Royal Institute recommends
            out[-1] += word
        elif "\u0e00" <= word[0] <= "\u0e7f":
            out.extend(thai_words(word))
        else:
            out.append(word)
    return out


@lru_cache(maxsize=1 << 16)
def thai_words(run: str) -> tuple[str, ...]:
    """A run of Thai letters split into words (PyThaiNLP ``newmm``, chunked so a long run stays linear)."""
    from pythainlp.tokenize.newmm import segment as newmm  # imported on the first Thai text only

    out: list[str] = []
    for word in newmm(run, safe_mode=True):
        if word.startswith(_REPEAT) and out:
            out[-1] += word
        else:
            out.append(word)
    return tuple(out)


class TypeCounter:
    """Exact word-type frequencies, or those of a uniform hash sample of types once the
    vocabulary outgrows ``max_types``.

    Sampling is by type (a type is kept iff the low ``level`` bits of its CRC-32 are zero),
    decided the first time a type is seen, so a kept type's count is always exact and the kept
    types are a uniform sample of all types at rate ``2**-level``: the share of hapax types and
    the distribution of type frequencies (hence the Zipf fit) stay unbiased, and the vocabulary
    size is ``len(kept) * 2**level``. Memory is O(max_types) whatever the corpus size.
    """

    def __init__(self, max_types: int) -> None:
        self.max_types = max_types
        self.counts: Counter[str] = Counter()
        self.tokens = 0
        self.level = 0

    def update(self, tokens: list[str]) -> None:
        self.tokens += len(tokens)
        if self.level == 0:
            self.counts.update(tokens)
        else:
            mask, counts = (1 << self.level) - 1, self.counts
            counts.update(t for t in tokens if t in counts or not zlib.crc32(t.encode()) & mask)
        while len(self.counts) > self.max_types:
            self.level += 1
            mask = (1 << self.level) - 1
            self.counts = Counter(
                {t: c for t, c in self.counts.items() if not zlib.crc32(t.encode()) & mask}
            )

    @property
    def sample_rate(self) -> float:
        return 2.0**-self.level

    @property
    def vocab_size(self) -> int:
        return len(self.counts) << self.level

    def ttr(self) -> float:
        return min(1.0, self.vocab_size / self.tokens) if self.tokens else 0.0

    def hapax_ratio(self) -> float:
        if not self.counts:
            return 0.0
        return sum(1 for c in self.counts.values() if c == 1) / len(self.counts)

    def frequency_of_frequencies(self) -> Counter[int]:
        """How many (kept) types occur exactly f times, for each f."""
        return Counter(self.counts.values())


class Mattr:
    """Moving-average type-token ratio (Covington & McFall 2010) over the whole token stream.

    MATTR = mean over every window of ``window`` consecutive tokens of (types in window / window).
    Exact and streaming: each chunk of tokens is processed with the last ``window - 1`` tokens of
    the previous one, counting for each token the windows in which it is the first occurrence
    of its type (vectorised with numpy; tokens are compared by hash). When the stream is shorter
    than the window, the window shrinks to the stream and MATTR equals TTR.
    """

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self.tokens = 0
        self._distinct_sum = 0
        self._carry = np.empty(0, dtype=np.int64)

    def update(self, tokens: Iterable[str]) -> None:
        ids = np.fromiter(map(hash, tokens), dtype=np.int64)
        if not ids.size:
            return
        self.tokens += ids.size
        stream = np.concatenate([self._carry, ids])
        first_end = max(
            self._carry.size, self.window - 1
        )  # windows ending in this chunk, full length
        self._distinct_sum += _window_distinct_sum(stream, self.window, first_end)
        self._carry = stream[-(self.window - 1) :] if self.window > 1 else stream[:0]

    def value(self, ttr_if_short: float) -> float:
        windows = self.tokens - self.window + 1
        if windows <= 0:
            return ttr_if_short
        return self._distinct_sum / (windows * self.window)

    def effective_window(self) -> int:
        return min(self.window, self.tokens) or 1


def _window_distinct_sum(ids: np.ndarray, window: int, first_end: int) -> int:
    """Sum over windows ``[e - window + 1, e]`` with ``first_end <= e < len(ids)`` of their distinct ids.

    Token ``i`` is the first of its id in the window ending at ``e`` iff
    ``max(i, prev(i) + window) <= e <= i + window - 1``, where ``prev(i)`` is the previous
    position holding the same id.
    """
    n = ids.size
    if n <= first_end:
        return 0
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    prev = np.full(n, -window, dtype=np.int64)
    same = sorted_ids[1:] == sorted_ids[:-1]
    prev[order[1:][same]] = order[:-1][same]
    positions = np.arange(n, dtype=np.int64)
    lo = np.maximum(np.maximum(positions, prev + window), first_end)
    hi = np.minimum(positions + window - 1, n - 1)
    return int(np.clip(hi - lo + 1, 0, None).sum())
