"""Share of characters per writing system (Unicode blocks), whitespace excluded.

Classes: latin, cyrillic, greek, arabic, hebrew, devanagari, ethiopic, cjk (Han and kana),
hangul, digit (ASCII 0-9), emoji, punct_symbol (ASCII and general punctuation, symbols),
other. Computed exactly over every character with a code-point lookup table (numpy).
"""

from __future__ import annotations

import numpy as np

SCRIPTS = (
    "latin",
    "cyrillic",
    "greek",
    "arabic",
    "hebrew",
    "devanagari",
    "ethiopic",
    "cjk",
    "hangul",
    "digit",
    "emoji",
    "punct_symbol",
    "other",
)
_SPACE = len(SCRIPTS)
_TABLE_SIZE = 0x30000
_RANGES: dict[str, list[tuple[int, int]]] = {
    "punct_symbol": [
        (0x21, 0x7E),
        (0xA1, 0xBF),
        (0x2010, 0x2BFF),
        (0x3000, 0x303F),
        (0xFF01, 0xFF0F),
    ],
    "digit": [(0x30, 0x39)],
    "latin": [
        (0x41, 0x5A),
        (0x61, 0x7A),
        (0xC0, 0xD6),
        (0xD8, 0xF6),
        (0xF8, 0x24F),
        (0x1E00, 0x1EFF),
    ],
    "greek": [(0x370, 0x3FF), (0x1F00, 0x1FFF)],
    "cyrillic": [(0x400, 0x52F)],
    "hebrew": [(0x590, 0x5FF)],
    "arabic": [(0x600, 0x6FF), (0x750, 0x77F), (0x8A0, 0x8FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)],
    "devanagari": [(0x900, 0x97F)],
    "ethiopic": [(0x1200, 0x139F), (0x2D80, 0x2DDF)],
    "hangul": [(0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF)],
    "cjk": [
        (0x3040, 0x30FF),
        (0x3400, 0x4DBF),
        (0x4E00, 0x9FFF),
        (0xF900, 0xFAFF),
        (0x20000, 0x2FFFF),
    ],
    "emoji": [(0x2600, 0x27BF), (0x1F000, 0x1FAFF)],
}
_WHITESPACE = [
    (0x0, 0x20),
    (0x7F, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200F),
    (0x2028, 0x202F),
    (0x205F, 0x206F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
]


def _table() -> np.ndarray:
    """The class of every code point (0..0x10FFFF; "other" from _TABLE_SIZE on)."""
    table = np.full(0x110000, SCRIPTS.index("other"), dtype=np.uint8)
    for name, ranges in _RANGES.items():  # later entries win: emoji over punct_symbol
        for lo, hi in ranges:
            table[lo : hi + 1] = SCRIPTS.index(name)
    for lo, hi in _WHITESPACE:
        table[lo : hi + 1] = _SPACE
    return table


_LOOKUP = _table()


def script_counts(text: str) -> np.ndarray:
    """Characters of ``text`` per class of :data:`SCRIPTS` (whitespace not counted)."""
    code_points = np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)
    return np.bincount(_LOOKUP[code_points], minlength=_SPACE + 1)[:_SPACE]


def script_mix(counts: np.ndarray) -> dict[str, float]:
    """Shares of the non-zero classes, summing to 1."""
    total = int(counts.sum())
    return (
        {name: float(c) / total for name, c in zip(SCRIPTS, counts, strict=True) if c}
        if total
        else {}
    )
