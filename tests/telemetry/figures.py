"""Read the figures a dashboard page embeds (``data-figure`` JSON): the numbers it draws."""

from __future__ import annotations

import html
import json
import re
from typing import Any

Figure = dict[str, Any]


def figures(page: str) -> list[Figure]:
    """Every figure of ``page``, in page order."""
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]


def titled(page: str, words: str) -> Figure:
    """The one figure of ``page`` whose title holds ``words``."""
    found = [f for f in figures(page) if words in f["layout"]["title"]["text"]]
    assert len(found) == 1, f"{len(found)} figures titled {words!r}"
    return found[0]


def traces(figure: Figure, kind: str) -> list[dict[str, Any]]:
    """The traces of ``figure`` of one plotly type (bar, scatter)."""
    return [t for t in figure["data"] if t["type"] == kind]


def stored(figure: Figure) -> list[float]:
    """A bar chart's values in their stored unit, in drawing order."""
    return [v for t in traces(figure, "bar") for v in t["customdata"]]
