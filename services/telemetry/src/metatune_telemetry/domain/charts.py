"""Server-side SVG charts (no JavaScript, no CDN): the dashboard renders offline.

Every mark carries its numbers as ``data-*`` attributes and a ``<title>`` tooltip, so a reader
can hover it and a test can read what was drawn.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

PALETTE = ["#2b8a3e", "#1971c2", "#e8590c", "#862e9c", "#c92a2a", "#5c940d"]
LEFT, TOP, BOTTOM = 70, 22, 28  # margins: row labels / axis values, title, time axis
LABELLED_BARS = 8  # bar charts with at most this many bars print each label under its bar
CHAR_PX = 6.0  # width of a 10 px label character: a label is printed only where it fits
# a unit and its smaller forms: values are shown in the first whose figures are >= 1
SMALLER_UNITS = {
    "kWh": (("kWh", 1.0), ("Wh", 1e3), ("mWh", 1e6)),
    "kgCO2eq": (("kgCO2eq", 1.0), ("gCO2eq", 1e3), ("mgCO2eq", 1e6)),
}


def readable_unit(top: float, unit: str) -> tuple[str, float]:
    """(unit, factor) in which ``top`` reads with digits before the point: 1.9e-05 kWh is
    19.2 mWh. Units without smaller forms stay as they are."""
    forms = SMALLER_UNITS.get(unit, ((unit, 1.0),))
    return next(((u, f) for u, f in forms if top * f >= 1), forms[-1])


def plain(value: float) -> str:
    """Three significant figures, never in scientific notation."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _open(title: str, width: int, height: int) -> str:
    return (
        f'<svg class="chart" role="img" aria-label="{_esc(title)}" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{_esc(title)}</title>'
        f'<text x="4" y="14" font-size="12">{_esc(title)}</text>'
    )


def _empty(title: str, width: int) -> str:
    return f'<svg class="chart empty" width="{width}" height="40"><text x="4" y="24">{_esc(title)}: no data</text></svg>'


@dataclass(frozen=True, slots=True)
class _Scale:
    """A linear map of [lo, hi] onto [a, b] pixels (a flat domain maps to the middle)."""

    lo: float
    hi: float
    a: float
    b: float

    def __call__(self, value: float) -> float:
        if self.hi == self.lo:
            return (self.a + self.b) / 2
        return self.a + (value - self.lo) * (self.b - self.a) / (self.hi - self.lo)


def bar_chart(
    title: str,
    bars: Sequence[tuple[str, float, str | None]],
    unit: str,
    width: int = 640,
    height: int = 220,
) -> str:
    """Bars of (label, value, series); a missing (unpriced) value is drawn as a hatched stub."""
    if not bars:
        return _empty(title, width)
    top = max(v for _, v, _ in bars) or 1.0
    step = (width - 60) / len(bars)
    series = sorted({s or "" for _, _, s in bars})
    shown, factor = readable_unit(top, unit)
    parts = [_open(f"{title} ({shown}, max {plain(top * factor)})", width, height)]
    for i, (label, value, s) in enumerate(bars):
        h = (height - 50) * value / top
        color = PALETTE[series.index(s or "") % len(PALETTE)]
        text = f"{label}: {plain(value * factor)}"
        parts.append(
            f'<rect class="bar" data-value="{value:.6g}" x="{40 + i * step:.1f}" y="{height - 30 - h:.1f}" '
            f'width="{max(1.0, step * 0.8):.1f}" height="{h:.1f}" fill="{color}">'
            f"<title>{_esc(text)} {_esc(shown)}</title></rect>"
        )
        # under its bar only where it fits (else the tooltip carries it): no overlapping labels
        if len(bars) <= LABELLED_BARS and len(text) * CHAR_PX <= step:
            parts.append(
                f'<text x="{40 + i * step:.1f}" y="{height - 16}" font-size="10">{_esc(text)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class GanttBar:
    row: str  # the datacenter
    start: datetime
    end: datetime
    kind: str  # css class: ran (a filled bar) | planned | baseline (thin, dashed)
    label: str  # tooltip
    data: dict[str, str]  # extra data-* attributes


@dataclass(frozen=True, slots=True)
class GanttMark:
    row: str
    at: datetime
    label: str


def gantt(
    title: str,
    bars: Sequence[GanttBar],
    marks: Sequence[GanttMark] = (),
    width: int = 720,
    row_height: int = 30,
) -> str:
    """One row per datacenter, time across; other kinds sit thin and dashed under the ``ran`` bars."""
    if not bars and not marks:
        return _empty(title, width)
    rows = sorted({b.row for b in bars} | {m.row for m in marks})
    times = [b.start for b in bars] + [b.end for b in bars] + [m.at for m in marks]
    t0, t1 = (
        min(times).astimezone(UTC),
        max(max(times), min(times) + timedelta(hours=1)).astimezone(UTC),
    )
    x = _Scale(t0.timestamp(), t1.timestamp(), LEFT, width - 10)
    height = TOP + row_height * len(rows) + BOTTOM
    parts = [_open(title, width, height)]
    for i, row in enumerate(rows):
        y = TOP + i * row_height
        parts.append(
            f'<text class="row" x="4" y="{y + row_height * 0.6:.1f}" font-size="11">{_esc(row)}</text>'
            f'<line x1="{LEFT}" x2="{width - 10}" y1="{y + row_height:.1f}" y2="{y + row_height:.1f}" '
            f'stroke="#ddd"/>'
        )
    for bar in bars:
        y = TOP + rows.index(bar.row) * row_height
        top, h = (
            (y + 4, row_height * 0.55)
            if bar.kind == "ran"
            else (y + row_height * 0.65, row_height * 0.25)
        )
        color = "#888" if bar.kind == "baseline" else PALETTE[rows.index(bar.row) % len(PALETTE)]
        style = (
            f'fill="{color}"'
            if bar.kind == "ran"
            else f'fill="none" stroke="{color}" stroke-dasharray="3 2"'
        )
        data = "".join(f' data-{k}="{_esc(v)}"' for k, v in bar.data.items())
        x0, x1 = x(bar.start.timestamp()), x(bar.end.timestamp())
        parts.append(
            f'<rect class="gantt-bar {_esc(bar.kind)}" data-datacenter="{_esc(bar.row)}" '
            f'data-start="{bar.start.isoformat()}" data-end="{bar.end.isoformat()}"{data} x="{x0:.1f}" '
            f'y="{top:.1f}" width="{max(1.0, x1 - x0):.1f}" height="{h:.1f}" {style}>'
            f"<title>{_esc(bar.label)}</title></rect>"
        )
    for mark in marks:
        y, mx = TOP + rows.index(mark.row) * row_height, x(mark.at.timestamp())
        parts.append(
            f'<line class="gantt-mark" data-datacenter="{_esc(mark.row)}" data-at="{mark.at.isoformat()}" '
            f'x1="{mx:.1f}" x2="{mx:.1f}" y1="{y + 1}" y2="{y + row_height - 1}" stroke="#000" stroke-width="2">'
            f"<title>{_esc(mark.label)}</title></line>"
        )
    axis_y = TOP + row_height * len(rows) + 16
    parts.append(
        f'<text x="{LEFT}" y="{axis_y}" font-size="10">{t0:%Y-%m-%d %H:%M} UTC</text>'
        f'<text x="{width - 10}" y="{axis_y}" font-size="10" text-anchor="end">{t1:%Y-%m-%d %H:%M}</text></svg>'
    )
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class BandCurve:
    label: str  # e.g. the forecast's issue time
    times: Sequence[datetime]
    median: Sequence[float]
    low: Sequence[float]  # p10
    high: Sequence[float]  # p90


def band_chart(
    title: str, curves: Sequence[BandCurve], unit: str, width: int = 720, height: int = 260
) -> str:
    """Median lines over shaded low-high bands; the first curve is drawn strongest (the latest)."""
    curves = [c for c in curves if c.times]
    if not curves:
        return _empty(title, width)
    t0 = min(c.times[0] for c in curves).timestamp()
    t1 = max(c.times[-1] for c in curves).timestamp()
    top = max(max(c.high) for c in curves) or 1.0
    x = _Scale(t0, t1, LEFT, width - 10)
    y = _Scale(0.0, top, height - BOTTOM, TOP)
    parts = [_open(f"{title} ({unit}, max {plain(top)})", width, height)]
    for i, curve in reversed(list(enumerate(curves))):  # the latest on top
        color, opacity = PALETTE[i % len(PALETTE)], (0.25 if i == 0 else 0.08)
        xs = [x(t.timestamp()) for t in curve.times]
        band = [f"{px:.1f},{y(v):.1f}" for px, v in zip(xs, curve.high, strict=True)]
        band += [
            f"{px:.1f},{y(v):.1f}" for px, v in reversed(list(zip(xs, curve.low, strict=True)))
        ]
        parts.append(
            f'<polygon class="band" data-label="{_esc(curve.label)}" data-low="{min(curve.low):.6g}" '
            f'data-high="{max(curve.high):.6g}" points="{" ".join(band)}" fill="{color}" '
            f'fill-opacity="{opacity}" stroke="none"><title>p10-p90, {_esc(curve.label)}</title></polygon>'
        )
        line = " ".join(f"{px:.1f},{y(v):.1f}" for px, v in zip(xs, curve.median, strict=True))
        values = " ".join(f"{v:.6g}" for v in curve.median)
        parts.append(
            f'<polyline class="median" data-label="{_esc(curve.label)}" data-values="{values}" '
            f'points="{line}" fill="none" stroke="{color}" stroke-width="{2 if i == 0 else 1}">'
            f"<title>median, {_esc(curve.label)}</title></polyline>"
        )
    parts.append(
        f'<text x="4" y="{y(top) + 4:.1f}" font-size="10">{plain(top)}</text>'
        f'<text x="4" y="{y(0.0):.1f}" font-size="10">0</text>'
        f'<text x="{LEFT}" y="{height - 8}" font-size="10">{datetime.fromtimestamp(t0, UTC):%Y-%m-%d %H:%M} UTC'
        f'</text><text x="{width - 10}" y="{height - 8}" font-size="10" text-anchor="end">'
        f"{datetime.fromtimestamp(t1, UTC):%Y-%m-%d %H:%M}</text></svg>"
    )
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class ScatterPoint:
    label: str
    x: float
    y: float
    x_err: float | None  # one standard deviation of x, drawn as a whisker
    data: dict[str, str]


def scatter(
    title: str,
    points: Sequence[ScatterPoint],
    x_label: str,
    y_label: str,
    size: int = 320,
    bounds: tuple[float, float] | None = None,
) -> str:
    """Points against the y = x diagonal (a perfect prediction sits on it). ``bounds``: the
    metric's range (accuracy: 0 to 1); the axes never run past it, whiskers are cut at it."""
    if not points:
        return _empty(title, size + 2 * LEFT)
    values = [p.y for p in points] + [p.x + s * (p.x_err or 0.0) for p in points for s in (-1, 1)]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    x = _Scale(lo, hi, LEFT, LEFT + size)
    y = _Scale(lo, hi, TOP + size, TOP)
    parts = [
        _open(title, size + 2 * LEFT, size + TOP + BOTTOM + 10),
        (
            f'<line class="diagonal" x1="{x(lo):.1f}" y1="{y(lo):.1f}" x2="{x(hi):.1f}" y2="{y(hi):.1f}" '
            f'stroke="#aaa" stroke-dasharray="4 3"/>'
        ),
    ]
    for i, p in enumerate(points):
        color = PALETTE[i % len(PALETTE)]
        if p.x_err:
            left, right = max(p.x - p.x_err, lo), min(p.x + p.x_err, hi)
            parts.append(
                f'<line class="whisker" x1="{x(left):.1f}" x2="{x(right):.1f}" '
                f'y1="{y(p.y):.1f}" y2="{y(p.y):.1f}" stroke="{color}"/>'
            )
        data = "".join(f' data-{k}="{_esc(v)}"' for k, v in p.data.items())
        parts.append(
            f'<circle class="point"{data} cx="{x(p.x):.1f}" cy="{y(p.y):.1f}" r="4" fill="{color}">'
            f"<title>{_esc(p.label)}: predicted {plain(p.x)}, actual {plain(p.y)}</title></circle>"
        )
    parts.append(
        f'<text x="{LEFT}" y="{TOP + size + 16}" font-size="10">{_esc(x_label)} ({plain(lo)} to {plain(hi)})</text>'
        f'<text x="4" y="{TOP + 10}" font-size="10">{_esc(y_label)}</text></svg>'
    )
    return "".join(parts)
