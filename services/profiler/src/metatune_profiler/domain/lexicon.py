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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import regex

_IDEOGRAPH_CLASS = r"[\p{Han}\p{Hiragana}\p{Katakana}\u30fc]"  # ー (U+30FC) lengthens kana: a kana
_LETTER = r"[\p{L}\p{M}\p{N}--\p{Han}\p{Hiragana}\p{Katakana}\u30fc\p{Thai}]"
_INNER = r"[\p{L}\p{M}\p{N}\u200c\u200d--\p{Han}\p{Hiragana}\p{Katakana}\u30fc\p{Thai}]"
WORD = regex.compile(
    rf"(?V1){_IDEOGRAPH_CLASS}\p{{M}}*"  # an ideograph with its marks (variation selectors, voicing marks)
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


def _scalar_chunks(size: int = 1 << 16) -> Iterator[tuple[np.ndarray, str]]:
    """Every Unicode scalar value (surrogates excluded), a chunk at a time (small transients):
    as code points and as a string of them."""
    for first in range(0, 0x110000, size):
        code_points = np.arange(first, first + size, dtype="<u4")
        code_points = code_points[(code_points < 0xD800) | (code_points > 0xDFFF)]
        yield code_points, code_points.tobytes().decode("utf-32-le")


def _covering_class(pattern: str, slack: int = 0x100) -> re.Pattern[str]:
    """A stdlib ``re`` class of every code point ``pattern`` (a regex class) matches, plus gaps of
    under ``slack`` between them: a superset with few ranges, which ``re`` scans fast."""
    points = np.concatenate(
        [
            code_points[[m.start() for m in regex.finditer(pattern, chunk)]].astype(np.int64)
            for code_points, chunk in _scalar_chunks()
        ]
    )
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


# ---------------------------------------------------------------- many texts at once
# ``word_ids`` gives the words of :func:`words` for a list of texts as 64-bit ids (a polynomial hash
# of the word's code points, mod 2**64), computed with numpy over the texts' code points instead of
# one regex match object and one string per word. It reads WORD's alternatives as rules on
# character classes (ideograph I, other letter or digit L, mark M, joiner Z, apostrophe A):
#
# * I starts a word, which takes the marks that follow it (``I M*``);
# * L, or a mark not in an ideograph's word, starts a word unless it continues a letter word
#   (one that began with L or M); an L right after an ideograph's word starts a new one;
# * Z is in a letter word when the nearest non-joiner before it is; A is when it stands between
#   a letter word's character and an L or M (``don't``); both only ever continue a word.
#
# On text without ideographs these are PLAIN_WORD's matches. Texts with a Thai character (or a
# mark that is itself an ideograph, which WORD treats specially) go through :func:`segment`.
# Equality with :func:`words` is property-tested.

_IS_OTHER, _IS_LETTER, _IS_MARK, _IS_JOINER, _IS_APOSTROPHE, _IS_IDEOGRAPH, _IS_SEGMENT = range(7)
_NEWLINE = 0x0A
_HASH_BASE = 0x9E3779B97F4A7C15  # odd, so invertible mod 2**64
_powers_cache: list[tuple[np.ndarray, np.ndarray]] = []


@lru_cache(maxsize=1)
def _char_classes() -> np.ndarray:
    """The class of each code point, by the regex module's properties as WORD reads them."""
    table = np.zeros(0x110000, dtype=np.uint8)

    def mark(pattern: str, value: int, only: int | None = None) -> None:
        for code_points, chunk in _scalar_chunks():
            for match in regex.finditer(pattern + "+", chunk):
                points = code_points[match.start() : match.end()]
                if only is None:
                    table[points] = value
                else:
                    table[points[table[points] == only]] = value

    mark(r"[\p{L}\p{N}]", _IS_LETTER)
    mark(r"\p{M}", _IS_MARK)
    mark(_IDEOGRAPH_CLASS, _IS_SEGMENT, only=_IS_MARK)  # an ideograph that is a mark
    mark(_IDEOGRAPH_CLASS, _IS_IDEOGRAPH, only=_IS_LETTER)
    mark(_IDEOGRAPH_CLASS, _IS_IDEOGRAPH, only=_IS_OTHER)
    mark(r"\p{Thai}", _IS_SEGMENT)
    table[[0x200C, 0x200D]] = _IS_JOINER
    table[[ord("'"), 0x2019]] = _IS_APOSTROPHE
    return table


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """base**k and base**-k mod 2**64 for k < n (cached, grown on demand; safe across threads:
    the cache is swapped whole)."""
    cached = _powers_cache[0] if _powers_cache else None
    if cached is None or cached[0].size < n:
        size = max(n, 2 * cached[0].size if cached is not None else 1 << 16)
        up, down = np.ones(size, dtype=np.uint64), np.ones(size, dtype=np.uint64)
        np.cumprod(np.full(size - 1, _HASH_BASE, dtype=np.uint64), out=up[1:])
        inverse = pow(_HASH_BASE, -1, 1 << 64)
        np.cumprod(np.full(size - 1, inverse, dtype=np.uint64), out=down[1:])
        cached = (up, down)
        _powers_cache[:] = [cached]
    return cached[0][:n], cached[1][:n]


def _hash_words(code_points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The hash of each word ``code_points[start:end]``: the sum of its code points times
    base**(offset in the word), mod 2**64 (from prefix sums, rescaled by base**-start)."""
    if not starts.size:
        return np.empty(0, dtype=np.uint64)
    up, down = _powers(code_points.size)
    prefix = np.cumsum(code_points * up)  # prefix[i]: the sum up to i included; starts are > 0
    hashes: np.ndarray = (prefix[ends - 1] - prefix[starts - 1]) * down[starts]
    # a bijective mix (splitmix64's finaliser), so that short words differ in their top bits too
    hashes ^= hashes >> np.uint64(30)
    hashes *= np.uint64(0xBF58476D1CE4E5B9)
    hashes ^= hashes >> np.uint64(27)
    hashes *= np.uint64(0x94D049BB133111EB)
    hashes ^= hashes >> np.uint64(31)
    return hashes


def _before(where: np.ndarray) -> np.ndarray:
    """For each position, the nearest position before it where ``where`` holds (0 if none)."""
    positions = np.where(where, np.arange(where.size), 0)
    nearest: np.ndarray = np.maximum.accumulate(positions)
    return np.concatenate([[0], nearest[:-1]])


def _word_spans(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each word of the classes of texts (each text between _IS_OTHER characters)."""
    letter, mark, ideograph = classes == _IS_LETTER, classes == _IS_MARK, classes == _IS_IDEOGRAPH
    in_word = letter | mark | ideograph
    marks_of_ideograph = np.zeros_like(mark)
    if ideograph.any() and mark.any():
        run_from = _before(~mark)  # the character before each mark's run of marks
        marks_of_ideograph = mark & ideograph[run_from]
    letter_word = letter | (mark & ~marks_of_ideograph)  # characters of words begun by L or M
    joiners = np.flatnonzero(classes == _IS_JOINER)
    if joiners.size:
        from_ = _before(classes != _IS_JOINER)[joiners]
        letter_word[joiners] = in_word[joiners] = letter_word[from_]
    apostrophes = np.flatnonzero(classes == _IS_APOSTROPHE)
    if apostrophes.size:  # never first or last: texts sit between newlines
        joins = letter_word[apostrophes - 1] & (letter | mark)[apostrophes + 1]
        in_word[apostrophes[joins]] = True
    after_word = np.concatenate([[False], in_word[:-1]])
    begins = ideograph | (((mark & ~marks_of_ideograph) | letter) & ~after_word)
    if ideograph.any():
        begins |= letter & np.concatenate([[False], (ideograph | marks_of_ideograph)[:-1]])
    starts = np.flatnonzero(begins)
    run_ends = np.flatnonzero(in_word[:-1] & ~in_word[1:]) + 1  # each run of in-word characters
    if run_ends.size == starts.size:  # one word per run
        return starts, run_ends
    runs = np.cumsum(~after_word[starts]) - 1  # a run's first character begins a word
    ends = run_ends[runs]
    ends[:-1] = np.minimum(ends[:-1], starts[1:])
    return starts, ends


@dataclass(frozen=True)
class WordIds:
    """The words of a list of texts: a 64-bit id per word, in text order, and the words per text."""

    ids: np.ndarray  # uint64
    counts: np.ndarray  # int64, one per text
    _points: np.ndarray  # code points of the texts (normalised), between newlines
    _starts: np.ndarray  # where each word found in _points starts
    _ends: np.ndarray
    _segmented: list[str]  # the words of the texts with ideographs / Thai, from segment()
    _order: np.ndarray | None  # position in (words of _points + _segmented) of each id

    def _sources(self, indices: np.ndarray) -> np.ndarray:
        return self._order[indices] if self._order is not None else indices

    def word(self, i: int) -> str:
        """The ``i``-th word as a string."""
        source = int(self._sources(np.asarray([i]))[0])
        if source < self._starts.size:
            return (
                self._points[self._starts[source] : self._ends[source]]
                .tobytes()
                .decode("utf-32-le")
            )
        return self._segmented[source - self._starts.size]

    def crc32s(self, indices: np.ndarray) -> np.ndarray:
        """zlib.crc32 of the UTF-8 bytes of the words at ``indices`` (uint32)."""
        sources = self._sources(indices)
        out = np.empty(indices.size, dtype=np.uint32)
        in_points = sources < self._starts.size
        found = sources[in_points]
        if found.size:
            starts = self._starts[found]
            spans = self._ends[found] - starts + 1  # each word and the character after it
            firsts = np.cumsum(spans) - spans
            points = self._points[np.repeat(starts - firsts, spans) + np.arange(int(spans.sum()))]
            points[firsts + spans - 1] = _NEWLINE
            text = points.tobytes().decode("utf-32-le")  # words hold no surrogate
            out[in_points] = np.fromiter(
                map(zlib.crc32, text.encode().split(b"\n")), dtype=np.uint32, count=found.size + 1
            )[:-1]
        segmented = sources[~in_points] - self._starts.size
        out[~in_points] = [zlib.crc32(self._segmented[i].encode()) for i in segmented]
        return out


def word_ids(texts: Sequence[str]) -> WordIds:
    """``[words(t) for t in texts]`` as ids: equal words get equal ids (distinct words collide
    with probability about 2**-64 per pair) and ``word(i)`` is the ``i``-th word itself."""
    normal = [t.lower() if t.isascii() else unicodedata.normalize("NFC", t).lower() for t in texts]
    joined = "\n" + "\n".join(normal) + "\n"
    points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    classes = _char_classes()[points]  # code points < 0x110000; lone surrogates are _IS_OTHER
    lengths = np.fromiter(map(len, normal), dtype=np.int64, count=len(normal))
    text_starts = np.cumsum(lengths + 1) - lengths
    spaceless = np.empty(0, dtype=np.int64)
    if classes.size and classes.max() == _IS_SEGMENT:
        flagged = np.flatnonzero(classes == _IS_SEGMENT)
        spaceless = np.unique(np.searchsorted(text_starts, flagged, side="right") - 1)
        for i in spaceless:  # their words come from segment(), below
            classes[text_starts[i] : text_starts[i] + lengths[i]] = _IS_OTHER
    starts, ends = _word_spans(classes)
    ids = _hash_words(points, starts, ends)
    text_of_word = np.searchsorted(text_starts, starts, side="right") - 1
    counts = np.bincount(text_of_word, minlength=len(normal)).astype(np.int64)
    segmented: list[str] = []
    order: np.ndarray | None = None
    if spaceless.size:
        per_text = [segment(normal[i]) for i in spaceless]
        segmented = [w for ws in per_text for w in ws]
        counts[spaceless] = [len(ws) for ws in per_text]
        seg_points = np.frombuffer(
            ("\n" + "\n".join(segmented) + "\n").encode("utf-32-le", "surrogatepass"),
            dtype=np.uint32,
        )
        seg_ends = np.flatnonzero(seg_points == _NEWLINE)[1:]
        seg_ids = _hash_words(seg_points, np.r_[1, seg_ends[:-1] + 1], seg_ends)
        owners = np.concatenate([text_of_word, np.repeat(spaceless, counts[spaceless])])
        order = np.argsort(owners, kind="stable")
        ids = np.concatenate([ids, seg_ids])[order]
    return WordIds(ids, counts, points, starts, ends, segmented, order)


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


class TypeTable:
    """:class:`TypeCounter` for :class:`WordIds`: the same counts, sampling and summaries, with
    the types held as 64-bit ids in sorted numpy arrays (with each type's count and the CRC-32
    that decides its sampling) instead of a Counter of strings."""

    def __init__(self, max_types: int) -> None:
        self.max_types = max_types
        self.tokens = 0
        self.level = 0
        self._ids = np.empty(0, dtype=np.uint64)
        self._counts = np.empty(0, dtype=np.int64)
        self._crcs = np.empty(0, dtype=np.uint32)

    def update(self, words: WordIds) -> None:
        ids, counts = np.unique(words.ids, return_counts=True)

        def crc32s(new: np.ndarray) -> np.ndarray:
            order = np.argsort(words.ids)
            some = order[np.searchsorted(words.ids[order], ids[new])]  # an occurrence of each
            return words.crc32s(some)

        self.add_types(words.ids.size, ids, counts, crc32s)

    def add_types(
        self,
        tokens: int,
        ids: np.ndarray,
        counts: np.ndarray,
        crc32s: Callable[[np.ndarray], np.ndarray],
    ) -> None:
        """``update`` given the words' distinct ``ids`` (sorted), their ``counts`` and
        ``crc32s(indices)``, the CRC-32 of the types at those indices of ``ids``."""
        self.tokens += tokens
        if tokens:
            at = np.searchsorted(self._ids, ids)
            known = at < self._ids.size
            known[known] = self._ids[at[known]] == ids[known]
            self._counts[at[known]] += counts[known]
            new = np.flatnonzero(~known)
            if new.size:
                crcs = crc32s(new)
                kept = (crcs & ((1 << self.level) - 1)) == 0
                new, crcs = new[kept], crcs[kept]
                placed = at[new] + np.arange(new.size)  # where the new types go, in order
                old = np.ones(self._ids.size + new.size, dtype=bool)
                old[placed] = False
                self._ids = _merged(self._ids, old, placed, ids[new])
                self._counts = _merged(self._counts, old, placed, counts[new])
                self._crcs = _merged(self._crcs, old, placed, crcs)
        while self._ids.size > self.max_types:
            self.level += 1
            kept = (self._crcs & ((1 << self.level) - 1)) == 0
            self._ids, self._counts, self._crcs = (
                self._ids[kept],
                self._counts[kept],
                self._crcs[kept],
            )

    @property
    def sample_rate(self) -> float:
        return 2.0**-self.level

    @property
    def vocab_size(self) -> int:
        return int(self._ids.size) << self.level

    def ttr(self) -> float:
        return min(1.0, self.vocab_size / self.tokens) if self.tokens else 0.0

    def hapax_ratio(self) -> float:
        if not self._ids.size:
            return 0.0
        return int(np.count_nonzero(self._counts == 1)) / int(self._ids.size)

    def frequency_of_frequencies(self) -> Counter[int]:
        """How many (kept) types occur exactly f times, for each f."""
        return Counter(self._counts.tolist())


def _merged(values: np.ndarray, old: np.ndarray, placed: np.ndarray, new: np.ndarray) -> np.ndarray:
    merged = np.empty(old.size, dtype=values.dtype)
    merged[old] = values
    merged[placed] = new
    return merged


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
        # by the hash of the UTF-8 bytes: CPython hashes a str by its internal buffer, so a
        # one-character CJK word collides with a two-letter Latin one ("止" with "bk")
        self.update_ids(
            np.fromiter((hash(t.encode("utf-8", "surrogatepass")) for t in tokens), dtype=np.int64)
        )

    def update_ids(self, ids: np.ndarray) -> None:
        """Same, with the tokens given as ids (equal tokens, equal ids), e.g. ``WordIds.ids``."""
        ids = ids.view(np.int64)
        if not ids.size:
            return
        self.tokens += ids.size
        stream = np.concatenate([self._carry, ids])
        first_end = max(
            self._carry.size, self.window - 1
        )  # windows ending in this chunk, full length
        self._distinct_sum += _window_distinct_sum(stream, self.window, first_end)
        self._carry = stream[-(self.window - 1) :] if self.window > 1 else stream[:0]

    def add_block(self, tokens: int, head: np.ndarray, tail: np.ndarray, inner: int) -> None:
        """``update_ids(ids)`` given only ``len(ids)``, ``head`` = ``ids[:window - 1]``, ``tail`` =
        ``ids[-(window - 1):]`` and ``inner`` = :func:`mattr_inner_sum` of ``ids``: the windows
        that start in earlier chunks are counted here, those inside ``ids`` were counted apart."""
        if not tokens:
            return
        self.tokens += tokens
        head = np.concatenate([self._carry, head.view(np.int64)])
        self._distinct_sum += inner + _window_distinct_sum(
            head, self.window, max(self._carry.size, self.window - 1)
        )
        if self.window == 1:
            return
        self._carry = (
            tail.view(np.int64) if tokens >= self.window - 1 else head[-(self.window - 1) :]
        )

    def value(self, ttr_if_short: float) -> float:
        windows = self.tokens - self.window + 1
        if windows <= 0:
            return ttr_if_short
        return self._distinct_sum / (windows * self.window)

    def effective_window(self) -> int:
        return min(self.window, self.tokens) or 1


def mattr_inner_sum(ids: np.ndarray, window: int) -> int:
    """The distinct ids summed over the windows of ``window`` tokens lying wholly in ``ids``."""
    return _window_distinct_sum(ids.view(np.int64), window, window - 1)


def _window_distinct_sum(ids: np.ndarray, window: int, first_end: int) -> int:
    """Sum over windows ``[e - window + 1, e]`` with ``first_end <= e < len(ids)`` of their distinct ids.

    Token ``i`` is the first of its id in the window ending at ``e`` iff
    ``max(i, prev(i) + window) <= e <= i + window - 1``, where ``prev(i)`` is the previous
    position holding the same id.
    """
    n = ids.size
    if n <= first_end:
        return 0
    order = _grouped_order(ids)
    sorted_ids = ids[order]
    prev = np.full(n, -window, dtype=np.int64)
    same = sorted_ids[1:] == sorted_ids[:-1]
    prev[order[1:][same]] = order[:-1][same]
    positions = np.arange(n, dtype=np.int64)
    lo = np.maximum(np.maximum(positions, prev + window), first_end)
    hi = np.minimum(positions + window - 1, n - 1)
    return int(np.clip(hi - lo + 1, 0, None).sum())


def _grouped_order(ids: np.ndarray) -> np.ndarray:
    """An order of ``ids`` with equal ids together, each group in position order (what a stable
    argsort gives). Fast path: one (non-arg) sort of keys holding an id's top bits above its
    position, valid when no two different ids with the same top bits end up side by side."""
    n = ids.size
    bits = max(1, (n - 1).bit_length())
    if bits <= 32:
        low = np.uint64((1 << bits) - 1)
        keys = (ids.view(np.uint64) & ~low) | np.arange(n, dtype=np.uint64)
        keys.sort()
        order = (keys & low).astype(np.int64)
        grouped = ids[order]
        same_top = (keys[1:] & ~low) == (keys[:-1] & ~low)
        if not (same_top & (grouped[1:] != grouped[:-1])).any():
            return order
    return np.argsort(ids, kind="stable")
