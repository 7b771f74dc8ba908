"""The dashboard's HTML pages (pure: view models in, HTML out; charts from :mod:`.charts`).

Tables and links need no JavaScript; the charts are drawn by plotly.js, which the dashboard
serves itself at :data:`PLOTLY_JS` (offline, no CDN). Pages link each other (study -> its jobs
-> the datacenters they ran at) so a reader can follow a trial from prediction to emissions.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from urllib.parse import quote

from metatune import units
from metatune.display import beside_baseline, trial_label

from ...disclosure.domain.disclosure import HourLine, StudyDisclosure
from ...disclosure.domain.formats import energy, run_rows
from ...disclosure.domain.formats import priced_at as _priced_at
from .charts import (
    BandCurve,
    GanttBar,
    GanttMark,
    HourBar,
    ScatterPoint,
    band_chart,
    bar_chart,
    datacenter_colors,
    embed,
    empty,
    gantt,
    hourly_bars,
    scatter,
)
from .timelines import study_timeline, trial_emissions
from .views import DatacenterForecast, JobTimeline, Stretch, StudyListing, Trial

STYLE = (
    "body{font-family:sans-serif;max-width:960px;margin:1em auto}td,th{text-align:left;padding:2px 8px}"
    ".chart{margin:1em 0}"
)
PLOTLY_JS = (
    "/static/plotly.min.js"  # the route serving the plotly.js of the installed plotly package
)
# draws every figure a page embeds (charts.embed: its JSON is in the element's data-figure) and
# marks it data-drawn once plotly has finished, for readers that wait on it (the browser test)
DRAW = (
    'for (const el of document.querySelectorAll("[data-figure]")) {'
    "const f = JSON.parse(el.dataset.figure);"
    "Plotly.newPlot(el, f.data, f.layout, {responsive: true, displaylogo: false})"
    '.then(() => { el.dataset.drawn = ""; });}'
)


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title><style>{STYLE}</style>"
        f'<script src="{PLOTLY_JS}"></script>{body}<script>{DRAW}</script>'
    )


def _kg(value: float | None, unknown: str = "unpriced") -> str:
    """A mass of CO2eq given in kg, in the unit that suits it (``57.3 mg``)."""
    return units.mass(None if value is None else value * 1000, unknown)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _dc_link(datacenter: str) -> str:
    return f'<a href="/datacenters/{quote(datacenter)}">{html.escape(datacenter)}</a>'


def _best(s: StudyListing) -> str:
    """The best accuracy beside its dataset's majority-class and chance baselines."""
    if s.best_accuracy is None:
        return _num(None)
    return html.escape(
        beside_baseline(s.best_accuracy, s.majority_baseline, s.chance_baseline, digits=4)
    )


def index_page(studies: list[StudyListing]) -> str:
    """Every study, newest first: its name, how many trials ended, the best accuracy so far."""
    rows = "".join(
        f'<tr><td><a href="/studies/{s.study_id}">{html.escape(s.name or str(s.study_id))}</a></td>'
        f"<td>{s.submitted_at:%Y-%m-%d %H:%M}</td><td>{html.escape(s.base_model)}</td>"
        f"<td>{html.escape(s.task)}</td><td>{s.trials_finished} / {s.trials_requested}</td>"
        f"<td>{_best(s)}</td><td>{html.escape(s.deadline_cell)}</td>"
        f"<td><code>{s.study_id}</code></td></tr>"
        for s in studies
    )
    table = (
        "<table class=studies><tr><th>study</th><th>submitted (UTC)</th><th>base model</th>"
        f"<th>task</th><th>trials ended / requested</th><th>best accuracy</th>"
        f"<th>deadline (runs ended)</th><th>id</th></tr>{rows}"
        "</table>"
        if studies
        else "<p>No study yet: <code>metatune submit FILE</code> starts one.</p>"
    )
    return _page("MetaTune studies", f"<h1>Studies</h1>{table}")


def study_page(
    d: StudyDisclosure,
    trials: list[Trial],
    name: str | None = None,
    timelines: Sequence[JobTimeline] = (),
) -> str:
    """A study: its energy and emissions per run-hour, where and when each trial ran against
    running it now at home (``timelines``, one per trial), predicted against actual."""
    title = f"{name} ({d.study_id})" if name else str(d.study_id)
    study = name or str(d.study_id)
    # one colour per datacenter on every chart of the page
    colors = datacenter_colors(
        [s.datacenter for t in timelines for s in t.ran]
        + [h.datacenter for r in d.runs for h in r.hours]
    )
    parts = [
        f"<h1>Study {html.escape(title)}</h1><p>{energy(d.it_energy_kwh)} IT, {_kg(d.kgco2eq)} CO2eq ({d.pricing}; "
        f"{html.escape(_priced_at(d.realised_hours, d.forecast_priced_hours))}; every hour at the "
        f"forecast intensity: {_kg(d.forecast_kgco2eq)} CO2eq)</p>",
        *(
            [f"<p>Deadline {d.deadline:%Y-%m-%d %H:%M} UTC: {html.escape(d.deadline_outcome)}</p>"]
            if d.deadline is not None and d.deadline_outcome
            else []
        ),
        embed(study_timeline(study, timelines, colors)),
        embed(trial_emissions(study, timelines)),
    ]
    hours = [(r, h) for r in d.runs for h in r.hours]
    parts.append(
        embed(
            hourly_bars(
                f"{study}: facility energy per run-hour",
                [_hour_bar(r.trial_index, h, h.facility_energy_kwh) for r, h in hours],
                "kWh",
                "facility energy",
                colors,
            )
        )
    )
    parts.append(
        embed(
            hourly_bars(
                f"{study}: emissions per run-hour (priced hours)",
                [_hour_bar(r.trial_index, h, h.kgco2eq) for r, h in hours if h.kgco2eq is not None],
                "kgCO2eq",
                "emissions",
                colors,
            )
        )
    )
    parts.append(_trials(trials, study))
    for run in d.runs:
        rows = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in run_rows(run)
        )
        parts.append(
            f'<h2><a href="/jobs/{run.job_id}">Trial {trial_label(run.trial_index)}</a> ({html.escape(run.outcome)})</h2>'
            f"<table>{rows}</table>"
        )
    return _page(f"MetaTune study {name or d.study_id}", "".join(parts))


def _hour_bar(trial_index: int | None, h: HourLine, value: float) -> HourBar:
    label = f"trial {trial_label(trial_index)} at {h.datacenter}, {h.hour:%m-%d %H:%M} UTC"
    return HourBar(h.hour, value, h.datacenter, label)


# the range a metric lives in: a scatter of it never draws an axis past it
METRIC_RANGES = {"accuracy": (0.0, 1.0), "macro_f1": (0.0, 1.0), "val_loss": (0.0, float("inf"))}


def _actual(t: Trial) -> str:
    """The objective reached; an accuracy beside its dataset's majority-class and chance baselines."""
    if t.metric_name == "accuracy" and t.actual is not None:
        return html.escape(
            beside_baseline(t.actual, t.majority_baseline, t.chance_baseline, digits=4)
        )
    return _num(t.actual)


def _trials(trials: list[Trial], study: str) -> str:
    """Predicted against actual objective: a scatter per objective of the finished trials, a table of all."""
    points: dict[str, list[ScatterPoint]] = {}
    for t in trials:
        if t.predicted is not None and t.actual is not None:
            points.setdefault(t.metric_name, []).append(
                ScatterPoint(
                    f"trial {trial_label(t.trial_index)}",
                    t.predicted,
                    t.actual,
                    t.predicted_std,
                    {
                        "trial": str(t.trial_index),
                        "metric": t.metric_name,
                        "predicted": f"{t.predicted:.6g}",
                        "actual": f"{t.actual:.6g}",
                    },
                    t.majority_baseline if t.metric_name == "accuracy" else None,
                    t.chance_baseline if t.metric_name == "accuracy" else None,
                )
            )
    charts = "".join(
        embed(
            scatter(
                f"{study}: predicted vs actual {name} per trial (whiskers: ±1 sd)",
                group,
                f"predicted {name}",
                f"actual {name}",
                bounds=METRIC_RANGES.get(name),
            )
        )
        for name, group in sorted(points.items())
    ) or embed(empty(f"{study}: predicted vs actual"))
    rows = "".join(
        f'<tr><td><a href="/jobs/{t.job_id}">{trial_label(t.trial_index)}</a></td><td>{html.escape(t.status)}</td>'
        f"<td>{html.escape(t.metric_name)}</td><td>{_num(t.predicted)}"
        f"{'' if t.predicted_std is None else f' ± {t.predicted_std:.4g}'}</td><td>{_actual(t)}</td></tr>"
        for t in trials
    )
    return (
        f"<h2>Predicted vs actual</h2>{charts}<table class=trials><tr><th>trial</th><th>status</th>"
        f"<th>objective</th><th>predicted</th><th>actual</th></tr>{rows}</table>"
    )


def _bar(stretch: Stretch, kind: str) -> GanttBar:
    data = {"hours": str(stretch.hours)}
    label = f"{kind} at {stretch.datacenter}, {stretch.start:%m-%d %H:%M} + {stretch.hours} h"
    if stretch.facility_energy_kwh is not None:
        data["kwh"] = f"{stretch.facility_energy_kwh:.6g}"
        label += f", {units.energy(stretch.facility_energy_kwh * 1000)}"
    if kind == "ran":
        data["kgco2eq"] = "unpriced" if stretch.kgco2eq is None else f"{stretch.kgco2eq:.6g}"
        label += f", {_kg(stretch.kgco2eq)} CO2eq"
    return GanttBar(stretch.datacenter, stretch.start, stretch.end, kind, label, data)


def _baseline_stretch(t: JobTimeline) -> list[Stretch]:
    """The hours the job would have run now at its home datacenter (none when unknown)."""
    b = t.baseline
    if not (b.datacenter and b.hours):
        return []
    return [Stretch(datacenter=b.datacenter, start=b.hours[0], hours=len(b.hours))]


def job_page(t: JobTimeline, study_name: str | None = None) -> str:
    """A job's timeline by datacenter against its run-now baseline; ``study_name`` titles its charts."""
    b = t.baseline
    baseline = _baseline_stretch(t)
    title = f"Trial {trial_label(t.trial_index)}" if t.trial_index is not None else "Job"
    named = f"{study_name}, {title.lower()}" if study_name else title
    chart = gantt(
        f"{named}: where and when it ran, was planned, would have run now",
        [_bar(s, "ran") for s in t.ran]
        + [_bar(s, "planned") for s in t.planned]
        + [_bar(s, "baseline") for s in baseline],
        [
            GanttMark(m.datacenter, m.at, f"{m.action} at {m.datacenter}, {m.at:%m-%d %H:%M}")
            for m in t.assignments
        ],
    )
    compared = [
        (label, value, label)
        for label, value in (
            (f"run now at {b.datacenter or 'home'}", b.kgco2eq),
            (f"plan v{t.plan_version}", t.planned_kgco2eq),
            ("actual", t.kgco2eq),
        )
        if value is not None
    ]
    study = (
        f' of <a href="/studies/{t.study_id}">study {html.escape(study_name or str(t.study_id))}</a>'
        if t.study_id
        else ""
    )
    rows = [
        ("Status", html.escape(t.status)),
        ("Home datacenter", _dc_link(t.home_datacenter) if t.home_datacenter else "unknown"),
        (
            "Ran at",
            ", ".join(_dc_link(dc) for dc in dict.fromkeys(s.datacenter for s in t.ran))
            or "not yet",
        ),
        ("Facility energy", f"{t.facility_energy_kwh:.4f} kWh"),
        ("Emissions", f"{_kg(t.kgco2eq, 'unpriced' if t.ran else 'none yet')} CO2eq"),
        ("Priced at", _priced_at(t.realised_hours, t.forecast_priced_hours)),
        (
            "Emissions at the forecast intensity",
            f"{_kg(t.forecast_kgco2eq, 'unpriced' if t.ran else 'none yet')} CO2eq",
        ),
        (
            f"Planned (plan v{t.plan_version})" if t.plan_version is not None else "Planned",
            f"{_kg(t.planned_kgco2eq, 'no plan')} CO2eq",
        ),
        (
            "Run-now baseline",
            f"{_kg(b.kgco2eq, 'unknown')} CO2eq"
            + (f" ({html.escape(b.missing)})" if b.missing else f", {len(b.hours)} h at home"),
        ),
    ]
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return _page(
        "MetaTune job",
        f"<h1>{title} {t.job_id}</h1><p>job{study}</p><table>{table}</table>{embed(chart)}"
        + embed(
            bar_chart(
                f"{named}: emissions against the run-now baseline", compared, "kgCO2eq", "emissions"
            )
        ),
    )


def datacenter_page(f: DatacenterForecast) -> str:
    curves = [
        BandCurve(
            f"issued {c.issued_at:%Y-%m-%d %H:%M}{' (stale)' if c.stale else ''}",
            c.hours,
            c.g_per_kwh,
            c.p10_g_per_kwh,
            c.p90_g_per_kwh,
        )
        for c in f.curves
    ]
    region = html.escape(f.region) if f.region else "unknown region"
    issues = "".join(f"<li>{html.escape(c.label)}: {len(c.times)} h</li>" for c in curves)
    return _page(
        "MetaTune datacenter",
        f"<h1>Datacenter {html.escape(f.datacenter)}</h1><p>grid region {region}</p>"
        + embed(
            band_chart(
                f"{f.datacenter}: carbon intensity forecasts for {region}, median and p10-p90",
                curves,
                "gCO2eq/kWh",
            )
        )
        + f"<ul>{issues}</ul>",
    )
