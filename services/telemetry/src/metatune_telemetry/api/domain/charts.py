"""The dashboard's charts as plotly figures (pure: numbers in, :class:`plotly.graph_objects.Figure` out).

The page embeds each figure's JSON (:func:`embed`) and the plotly.js bundled with the ``plotly``
package draws it in the browser, served by the dashboard itself: no CDN, it works offline.
Every axis has a title with its unit, numbers read in plain decimals (never 1e-05) and every mark
has a tooltip; the numbers drawn are the figure's data, so a test reads what a person sees.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

PALETTE = ["#2b8a3e", "#1971c2", "#e8590c", "#862e9c", "#c92a2a", "#5c940d"]
NUMBER = ",.3~r"  # d3-format: three significant figures, thousands separated, never scientific
TIME = "%Y-%m-%d %H:%M"
BAR_ROW_PX = 26  # a horizontal bar's row: one label per row, so labels never overlap
# a unit and its smaller forms: values are shown in the first whose figures are >= 1
SMALLER_UNITS = {
    "kWh": (("kWh", 1.0), ("Wh", 1e3), ("mWh", 1e6)),
    "kgCO2eq": (("kgCO2eq", 1.0), ("gCO2eq", 1e3), ("mgCO2eq", 1e6)),
}


# predicted-vs-actual points: a symbol and size each, drawn see-through with an outline, so two
# trials at the same spot both show (the larger under the smaller, different shapes)
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "pentagon", "star", "hexagon", "cross")
HOUR_MS = 3600 * 1000
# an hourly bar chart's tick spacing (hours) by the hours it spans: at most about 16 ticks
HOURLY_TICKS = ((12, 1), (36, 3), (96, 6), (192, 12))


def datacenter_colors(datacenters: Iterable[str]) -> dict[str, str]:
    """The colour of each datacenter on a page, the one every chart of the page draws it in: the
    palette in the datacenters' sorted order (so a page's datacenters never share a colour while
    the palette lasts, and the same datacenters always get the same colours)."""
    return {dc: PALETTE[i % len(PALETTE)] for i, dc in enumerate(sorted(set(datacenters)))}


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


def _utc(at: datetime) -> str:
    """A time as plotly.js reads it on a date axis: naive, in UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _number_axis(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "tickformat": NUMBER,
        "hoverformat": NUMBER,
        "exponentformat": "none",
        "ticks": "outside",  # ticks push their labels off the axis: two axes' 0 never collide
        "automargin": True,
        "rangemode": "tozero",
    } | extra


def _time_axis() -> dict[str, Any]:
    return {
        "title": {"text": "time (UTC)"},
        "type": "date",
        "tickformat": "%m-%d %H:%M",
        "hoverformat": TIME,
        "ticks": "outside",
        "automargin": True,
    }


def _figure(title: str, height: int, **layout: Any) -> go.Figure:
    return go.Figure(
        layout={
            "title": {"text": title, "x": 0, "xanchor": "left"},
            "height": height,
            "template": "plotly_white",
            "font": {"size": 12},
            "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
            "hovermode": "closest",
        }
        | layout
    )


def empty(title: str) -> go.Figure:
    """A titled figure that says there is nothing to draw."""
    return _figure(
        f"{title}: no data",
        120,
        xaxis={"visible": False},
        yaxis={"visible": False},
    )


def bar_chart(
    title: str,
    bars: Sequence[tuple[str, float, str | None]],
    unit: str,
    what: str,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """Horizontal bars of (label, value, series), one row per label, coloured by series (``colors``
    names a series' colour, the palette's otherwise). Values are drawn in the unit that shows them
    (:func:`readable_unit`); ``customdata`` keeps each value in ``unit``."""
    if not bars:
        return empty(title)
    shown, factor = readable_unit(max(v for _, v, _ in bars) or 1.0, unit)
    fig = _figure(
        title,
        110 + BAR_ROW_PX * len(bars),
        barmode="stack",
        legend={"traceorder": "normal"},  # in the rows' order, not plotly's reversed stack order
        xaxis=_number_axis(f"{what} ({shown})"),
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": [label for label, _, _ in bars],
            "autorange": "reversed",
            "automargin": True,
        },
    )
    for i, series in enumerate(dict.fromkeys(s for _, _, s in bars)):
        mine = [(label, value) for label, value, s in bars if s == series]
        fig.add_bar(
            name=series or what,
            orientation="h",
            y=[label for label, _ in mine],
            x=[value * factor for _, value in mine],
            customdata=[value for _, value in mine],
            marker_color=(colors or {}).get(series or "", PALETTE[i % len(PALETTE)]),
            hovertemplate=f"%{{y}}: %{{x:{NUMBER}}} {shown}<extra></extra>",
            showlegend=series is not None,
        )
    return fig


@dataclass(frozen=True, slots=True)
class HourBar:
    hour: datetime  # the hour's start
    value: float
    datacenter: str
    label: str  # tooltip, e.g. "trial #1 at fra1, 03-01 12:00"


def hourly_bars(
    title: str,
    bars: Sequence[HourBar],
    unit: str,
    what: str,
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """A value per hour on a time axis: one column per hour, its trials' bars stacked, coloured by
    datacenter (``colors``: the page's :func:`datacenter_colors`), a legend entry per datacenter.
    However many hours, the ticks stay readable: every 1, 3, 6, 12 or 24 h by the hours spanned,
    each with its day. ``customdata`` keeps each value in ``unit``."""
    if not bars:
        return empty(title)
    shown, factor = readable_unit(max(b.value for b in bars) or 1.0, unit)
    first, last = min(b.hour for b in bars), max(b.hour for b in bars)
    spanned = (last - first) / timedelta(hours=1) + 1
    every = next((step for most, step in HOURLY_TICKS if spanned <= most), 24)
    colors = colors or datacenter_colors(b.datacenter for b in bars)
    fig = _figure(
        title,
        380,
        barmode="stack",
        legend={"title": {"text": "datacenter"}},
        xaxis=_time_axis()
        | {
            "dtick": every * HOUR_MS,
            "tick0": "2000-01-01 00:00:00",  # ticks on the hours of the day divisible by dtick
            "tickformat": "%H:%M<br>%b %d",
        },
        yaxis=_number_axis(f"{what} ({shown})"),
    )
    for datacenter in sorted({b.datacenter for b in bars}):
        mine = [b for b in bars if b.datacenter == datacenter]
        fig.add_bar(
            name=datacenter,
            x=[_utc(b.hour + timedelta(minutes=30)) for b in mine],  # centred in its hour
            y=[b.value * factor for b in mine],
            width=[HOUR_MS * 0.9] * len(mine),
            customdata=[b.value for b in mine],
            hovertext=[b.label for b in mine],
            hovertemplate=f"%{{hovertext}}: %{{y:{NUMBER}}} {shown}<extra></extra>",
            marker_color=colors[datacenter],
            showlegend=True,  # named even when it is the only one
        )
    return fig


@dataclass(frozen=True, slots=True)
class GanttBar:
    row: str  # the datacenter
    start: datetime
    end: datetime
    kind: str  # ran | planned | baseline
    label: str  # tooltip
    data: dict[str, str] = field(default_factory=dict)  # the numbers behind it, kept as customdata


@dataclass(frozen=True, slots=True)
class GanttMark:
    row: str
    at: datetime
    label: str


GANTT_KINDS = {  # kind: (legend, fill, pattern)
    "ran": ("ran", None, ""),
    "planned": ("planned (latest plan)", None, "/"),
    "baseline": ("run now at home (baseline)", "#868e96", "."),
}


def gantt(
    title: str,
    bars: Sequence[GanttBar],
    marks: Sequence[GanttMark] = (),
    colors: Mapping[str, str] | None = None,
) -> go.Figure:
    """One row per datacenter, time across; in each row the kinds of bar sit side by side and
    assignments are ticks. Bars that ran or were planned take their datacenter's colour
    (``colors``, the page's :func:`datacenter_colors`)."""
    if not bars and not marks:
        return empty(title)
    rows = sorted({b.row for b in bars} | {m.row for m in marks})
    colors = colors or datacenter_colors(rows)
    fig = _figure(
        title,
        170 + 60 * len(rows),
        barmode="group",
        xaxis=_time_axis(),
        yaxis={
            "title": {"text": "datacenter"},
            "type": "category",
            "categoryorder": "array",
            "categoryarray": rows,
            "automargin": True,
        },
    )
    for kind, (legend, fill, pattern) in GANTT_KINDS.items():
        mine = [b for b in bars if b.kind == kind]
        if mine:
            fig.add_bar(
                name=legend,
                orientation="h",
                y=[b.row for b in mine],
                base=[_utc(b.start) for b in mine],
                x=[(b.end - b.start).total_seconds() * 1000 for b in mine],  # ms on a date axis
                customdata=[b.data for b in mine],
                hovertext=[b.label for b in mine],
                hovertemplate="%{hovertext}<extra></extra>",
                marker={
                    "color": fill or [colors[b.row] for b in mine],
                    "pattern": {"shape": pattern},
                },
            )
    if marks:
        fig.add_scatter(
            name="assignment",
            mode="markers",
            y=[m.row for m in marks],
            x=[_utc(m.at) for m in marks],
            hovertext=[m.label for m in marks],
            hovertemplate="%{hovertext}<extra></extra>",
            marker={"symbol": "line-ns-open", "size": 24, "color": "#000", "line": {"width": 2}},
        )
    return fig


@dataclass(frozen=True, slots=True)
class Span:
    """Hours of a trial at one datacenter."""

    start: datetime
    end: datetime
    datacenter: str
    label: str  # tooltip
    data: dict[str, str] = field(default_factory=dict)  # the numbers behind it, kept as customdata


@dataclass(frozen=True, slots=True)
class TimelineRow:
    trial: str  # "#1"
    ran: Sequence[
        Span
    ]  # where and when it ran: a trial that migrated has a span at each datacenter
    run_now: Span | None  # the counterfactual: at its home datacenter from when it was requested


RUN_NOW = "run now at home"
RUN_NOW_COLOR = "#adb5bd"


def timeline(
    title: str, rows: Sequence[TimelineRow], colors: Mapping[str, str] | None = None
) -> go.Figure:
    """A row per trial (in the given order, top down), time across: the hours it ran, coloured
    and labelled by datacenter, and beside them the hours it would have taken run now at home
    (grey, dotted), so a reader sees what the scheduler shifted. A label that does not fit its
    bar is hidden (the tooltip and legend still say it), never drawn over another. ``colors``:
    the page's :func:`datacenter_colors`."""
    rows = [r for r in rows if r.ran or r.run_now is not None]
    if not rows:
        return empty(title)
    fig = _figure(
        title,
        170 + 60 * len(rows),
        barmode="group",
        uniformtext={"minsize": 10, "mode": "hide"},
        legend={"traceorder": "normal"},
        xaxis=_time_axis(),
        yaxis={
            "title": {"text": "trial"},
            "type": "category",
            "categoryorder": "array",
            "categoryarray": [r.trial for r in rows],
            "autorange": "reversed",
            "automargin": True,
        },
    )
    datacenters = sorted({s.datacenter for r in rows for s in r.ran})
    colors = colors or datacenter_colors(datacenters)
    for datacenter in datacenters:
        spans = [(r.trial, s) for r in rows for s in r.ran if s.datacenter == datacenter]
        _spans(fig, f"ran at {datacenter}", "ran", spans, colors[datacenter])
    run_now = [(r.trial, r.run_now) for r in rows if r.run_now is not None]
    if run_now:  # light dots under dark text: the label stays legible
        dots = {"shape": ".", "fgcolor": "#f8f9fa", "solidity": 0.15}
        _spans(fig, RUN_NOW, "run now", run_now, RUN_NOW_COLOR, dots, "#212529")
    return fig


def _spans(
    fig: go.Figure,
    name: str,
    group: str,
    spans: list[tuple[str, Span]],
    color: str,
    pattern: dict[str, Any] | None = None,
    text_color: str | None = None,
) -> None:
    """One trace of bars: every span of ``spans`` in its trial's row, in the lane ``group``."""
    fig.add_bar(
        name=name,
        orientation="h",
        offsetgroup=group,  # the spans of one lane share it: a migrated trial's sit end to end
        y=[trial for trial, _ in spans],
        base=[_utc(s.start) for _, s in spans],
        x=[(s.end - s.start).total_seconds() * 1000 for _, s in spans],  # ms on a date axis
        text=[s.datacenter for _, s in spans],
        textposition="inside",
        insidetextanchor="middle",
        textfont={"color": text_color} if text_color else None,
        customdata=[s.data for _, s in spans],
        hovertext=[s.label for _, s in spans],
        hovertemplate="%{hovertext}<extra></extra>",
        marker={"color": color, "pattern": pattern or {"shape": ""}},
    )


@dataclass(frozen=True, slots=True)
class BandCurve:
    label: str  # e.g. the forecast's issue time
    times: Sequence[datetime]
    median: Sequence[float]
    low: Sequence[float]  # p10
    high: Sequence[float]  # p90


def band_chart(title: str, curves: Sequence[BandCurve], unit: str) -> go.Figure:
    """Median lines over shaded p10-p90 bands; the first curve is drawn strongest (the latest)."""
    curves = [c for c in curves if c.times]
    if not curves:
        return empty(title)
    fig = _figure(title, 380, xaxis=_time_axis(), yaxis=_number_axis(unit))
    for i, curve in reversed(list(enumerate(curves))):  # the latest on top
        color, opacity = PALETTE[i % len(PALETTE)], (0.25 if i == 0 else 0.08)
        times = [_utc(t) for t in curve.times]
        fig.add_scatter(
            x=times, y=list(curve.low), mode="lines", line={"width": 0}, showlegend=False,
            legendgroup=curve.label, name=f"p10, {curve.label}", meta="low",
            hovertemplate=f"p10 %{{y:{NUMBER}}} {unit}<extra></extra>",
        )  # fmt: skip
        fig.add_scatter(
            x=times, y=list(curve.high), mode="lines", line={"width": 0}, fill="tonexty",
            fillcolor=_rgba(color, opacity), legendgroup=curve.label, name=f"p10-p90, {curve.label}",
            meta="high", hovertemplate=f"p90 %{{y:{NUMBER}}} {unit}<extra></extra>",
        )  # fmt: skip
        fig.add_scatter(
            x=times, y=list(curve.median), mode="lines", line={"color": color, "width": 2 if i == 0 else 1},
            legendgroup=curve.label, name=f"median, {curve.label}", meta="median",
            hovertemplate=f"median %{{y:{NUMBER}}} {unit}<extra></extra>",
        )  # fmt: skip
    return fig


def _rgba(color: str, opacity: float) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{opacity})"


@dataclass(frozen=True, slots=True)
class ScatterPoint:
    label: str
    x: float
    y: float
    x_err: float | None  # one standard deviation of x, drawn as a whisker
    data: dict[str, str] = field(default_factory=dict)  # the numbers behind it, kept as customdata
    baseline: float | None = None  # the majority-class baseline of y, marked as a line
    chance: float | None = None  # the chance baseline of y (1 / classes), marked as a line


def scatter(
    title: str,
    points: Sequence[ScatterPoint],
    x_label: str,
    y_label: str,
    bounds: tuple[float, float] | None = None,
) -> go.Figure:
    """Points against the y = x diagonal (a perfect prediction sits on it), each with its
    majority-class and chance baselines marked (dotted, across). Each point is a trace of its own
    (meta ``trial``): a legend entry each, in its colour and symbol, so points that overlap stay
    told apart. ``bounds``: the metric's range (accuracy: 0 to 1); a bounded
    metric is drawn over its whole range, the axes never run past it, whiskers are cut at it."""
    if not points:
        return empty(title)
    lo, hi = _extent(points, bounds)
    axis = {"range": [lo, hi], "rangemode": "normal"}
    fig = _figure(
        title,
        460,
        xaxis=_number_axis(x_label, **axis, constrain="domain"),
        yaxis=_number_axis(y_label, **axis, scaleanchor="x", scaleratio=1, constrain="domain"),
    )
    fig.add_scatter(
        name="y = x", x=[lo, hi], y=[lo, hi], mode="lines", hoverinfo="skip",
        line={"color": "#aaa", "dash": "dash", "width": 1},
    )  # fmt: skip
    baselines = (  # (the points' attribute, also the trace's meta; name; hover; colour)
        ("baseline", "majority baseline", "majority-class baseline", "#c92a2a"),
        ("chance", "chance", "chance (1 / classes)", "#495057"),
    )
    for attribute, name, hover, color in baselines:
        for value in sorted({getattr(p, attribute) for p in points} - {None}):
            fig.add_scatter(
                name=f"{name} {plain(value)}", x=[lo, hi], y=[value, value], mode="lines",
                line={"color": color, "dash": "dot", "width": 1}, meta=attribute,
                hovertemplate=f"{hover} {plain(value)}<extra></extra>",
            )  # fmt: skip
    for i, p in enumerate(points):
        error = p.x_err or 0.0
        fig.add_scatter(
            name=p.label,
            meta="trial",
            mode="markers",
            x=[p.x],
            y=[p.y],
            customdata=[p.data],
            hovertext=[p.label],
            hovertemplate=f"%{{hovertext}}: predicted %{{x:{NUMBER}}}, actual %{{y:{NUMBER}}}<extra></extra>",
            marker={
                "size": 16 - 2 * (i % 4),
                "symbol": SYMBOLS[i % len(SYMBOLS)],
                "color": PALETTE[i % len(PALETTE)],
                "opacity": 0.75,
                "line": {"color": "#fff", "width": 1},
            },
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [min(p.x + error, hi) - p.x],
                "arrayminus": [p.x - max(p.x - error, lo)],
                "thickness": 1,
                "color": PALETTE[i % len(PALETTE)],
            },
        )
    return fig


def _extent(
    points: Sequence[ScatterPoint], bounds: tuple[float, float] | None
) -> tuple[float, float]:
    """The axes' common range: the metric's whole range where it is bounded, else the data's
    (whiskers and baselines included) padded by 5 % and cut at the bounds."""
    if bounds is not None and all(math.isfinite(b) for b in bounds):
        return bounds
    values = [p.y for p in points] + [
        b for p in points for b in (p.baseline, p.chance) if b is not None
    ]
    values += [p.x + s * (p.x_err or 0.0) for p in points for s in (-1, 1)]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    return (lo, hi) if bounds is None else (max(lo, bounds[0]), min(hi, bounds[1]))


def embed(fig: go.Figure) -> str:
    """The figure as an HTML element the page's script draws: its JSON in ``data-figure``."""
    return f'<div class="chart" data-figure="{html.escape(pio.to_json(fig), quote=True)}"></div>'
