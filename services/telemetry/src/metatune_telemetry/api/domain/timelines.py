"""A study's trials against running each now at home (pure: job timelines in, figures out).

Each trial is a row: the hours it ran, by datacenter (a migrated trial has a bar at each), beside
the run-now counterfactual, the scheduler's baseline: its hours at its home datacenter from the
hour it was requested. Beside the timeline, each trial's gCO2eq as run against run now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from metatune.display import trial_label

from .charts import RUN_NOW, RUN_NOW_COLOR, Span, TimelineRow, bar_chart, plain, timeline
from .views import JobTimeline, Stretch

AS_RUN = "as run"


def _grams(kg: float | None, unknown: str) -> str:
    return unknown if kg is None else f"{plain(kg * 1000)} gCO2eq"


def _hours(start_end: Stretch | Span) -> str:
    return f"{start_end.start:%m-%d %H:%M} to {start_end.end:%m-%d %H:%M} UTC"


def _ordered(timelines: Sequence[JobTimeline]) -> list[JobTimeline]:
    return sorted(timelines, key=lambda t: (t.trial_index is None, t.trial_index or 0))


def _where(t: JobTimeline) -> str:
    return ", ".join(dict.fromkeys(s.datacenter for s in t.ran))


def _versus(t: JobTimeline) -> tuple[str, str]:
    """(as run, run now): the trial's gCO2eq each way, in words."""
    b = t.baseline
    actual = _grams(t.kgco2eq, "unpriced" if t.ran else "not run yet")
    run_now = _grams(b.kgco2eq, f"unknown ({b.missing})" if b.missing else "unknown")
    return actual, run_now


def trial_row(t: JobTimeline) -> TimelineRow:
    """One trial's row: its stretches as run and its run-now hours, each with a tooltip that
    puts its gCO2eq as run beside run now."""
    name, b = trial_label(t.trial_index), t.baseline
    actual, run_now = _versus(t)
    home = b.datacenter or "home"
    ran = [
        Span(
            s.start,
            s.end,
            s.datacenter,
            f"{name} ran at {s.datacenter}, {_hours(s)} ({s.hours} h): "
            f"{_grams(s.kgco2eq, 'unpriced')}<br>the trial: {actual} as run, {run_now} run now "
            f"at {home}",
            {
                "hours": str(s.hours),
                "gco2eq": "unpriced" if s.kgco2eq is None else f"{s.kgco2eq * 1000:.6g}",
            },
        )
        for s in t.ran
    ]
    now = None
    if b.datacenter and b.hours:
        at = Stretch(datacenter=b.datacenter, start=b.hours[0], hours=len(b.hours))
        now = Span(
            at.start,
            at.end,
            at.datacenter,
            f"{name} run now at {home}, {_hours(at)} ({at.hours} h): {run_now}"
            f"<br>as run{f' at {_where(t)}' if t.ran else ''}: {actual}",
            {
                "hours": str(at.hours),
                "gco2eq": "unknown" if b.kgco2eq is None else f"{b.kgco2eq * 1000:.6g}",
            },
        )
    return TimelineRow(name, ran, now)


def study_timeline(
    study: str, timelines: Sequence[JobTimeline], colors: Mapping[str, str] | None = None
) -> go.Figure:
    """Every trial of a study, a row each: where and when it ran against run now at home
    (``colors``: the page's colour of each datacenter)."""
    return timeline(
        f"{study}: where and when each trial ran, against running it now at home",
        [trial_row(t) for t in _ordered(timelines)],
        colors,
    )


def trial_emissions(study: str, timelines: Sequence[JobTimeline]) -> go.Figure:
    """Each trial that ran: its emissions as run against run now at home (a value not known, an
    unpriced hour or an hour no forecast covered, has no bar; the timeline's tooltip says why)."""
    bars: list[tuple[str, float, str | None]] = []
    for t in _ordered(timelines):
        if not t.ran:
            continue
        name, b = trial_label(t.trial_index), t.baseline
        if t.kgco2eq is not None:
            bars.append((f"{name} as run at {_where(t)}", t.kgco2eq, AS_RUN))
        if b.kgco2eq is not None:
            bars.append((f"{name} run now at {b.datacenter}", b.kgco2eq, RUN_NOW))
    return bar_chart(
        f"{study}: emissions of each trial as run and run now at home",
        bars,
        "kgCO2eq",
        "emissions",
        {RUN_NOW: RUN_NOW_COLOR},
    )
