"""The dashboard's finish: a datacenter keeps one colour on every chart of a page; trials whose
predicted-vs-actual points overlap stay told apart, a legend entry each; an hourly chart of 61
hours reads as a time axis with a tick every 6 h and its day, not 61 labelled rows; no time is
shown with fractions of a second."""

from __future__ import annotations

import re
from datetime import timedelta
from uuid import uuid4

import pytest
from starlette.testclient import TestClient

from metatune import contracts as c
from metatune import subjects
from metatune.settings import Settings
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.api.domain.charts import (
    PALETTE,
    HourBar,
    ScatterPoint,
    datacenter_colors,
    hourly_bars,
    scatter,
)
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.builders import requested
from tests.support.samples import CONFIG, NOW, SPEC, started

from .figures import figures, stored, traces
from .scenario import record_dashboard

H = timedelta(hours=1)


def colours_by_datacenter(page: str, datacenters: set[str]) -> dict[str, set[str]]:
    """Every colour each datacenter is drawn in, over all of the page's charts: the bars named
    after it ("ran at osl1" on the timeline, "osl1" on the hourly charts) and the Gantt's."""
    seen: dict[str, set[str]] = {}
    for figure in figures(page):
        for trace in traces(figure, "bar"):
            color = trace["marker"]["color"]
            named = str(trace.get("name", "")).removeprefix("ran at ")
            if named in datacenters:
                seen.setdefault(named, set()).add(color)
            elif trace.get("name") in ("ran", "planned (latest plan)"):  # the Gantt: per row
                for row, one in zip(trace["y"], color, strict=True):
                    seen.setdefault(row, set()).add(one)
    return seen


async def a_third_trial_at_fra1(db, study, job) -> None:
    """A trial that ran two hours at fra1 after the scenario's two (osl1 first on the page)."""
    spec = SPEC.model_copy(update={"webhook_url": None, "name": "intents-en"})
    hours = [
        c.HourlyEnergy(
            hour=NOW + (5 + i) * H,
            datacenter="fra1",
            pue=1.25,
            energy_wh=300.0,
            g_per_kwh=300.0,
            emissions_g=300.0 / 1000 * 1.25 * 300.0,
        )
        for i in range(2)
    ]
    events = [
        (
            subjects.JOBS_REQUESTED,
            requested(job, study, spec=spec, trial_index=2, estimated_gpu_hours=2.0, power_kw=0.3),
        ),
        started(job, "fra1", study, NOW + 5 * H),
        (
            subjects.runs_completed("fra1"),
            c.RunCompleted(
                occurred_at=NOW + 7 * H,
                job_id=job,
                study_id=study,
                datacenter="fra1",
                config=CONFIG,
                steps=10,
                metrics=c.RunMetrics(val_loss=0.5),
                accounting=c.RunAccounting(energy_wh=600.0, wall_seconds=7200.0, hours=hours),
            ),
        ),
    ]
    result = await EventWriter(db).write(
        [Incoming("METATUNE", 500 + i, s, e.to_bytes()) for i, (s, e) in enumerate(events)]
    )
    assert not result.rejected


async def test_a_datacenter_keeps_one_colour_on_every_chart_of_a_page(db) -> None:
    s = await record_dashboard(db)  # trial #1 ran at osl1
    await a_third_trial_at_fra1(db, s.study, uuid4())
    with TestClient(create_app(db, Settings())) as web:
        study, job = web.get(f"/studies/{s.study}").text, web.get(f"/jobs/{s.job}").text
    seen = colours_by_datacenter(study, {"fra1", "osl1"})
    assert seen == {dc: {color} for dc, color in datacenter_colors(["fra1", "osl1"]).items()}
    # each is on the timeline and on both hourly charts: the same colour on each
    for dc in ("fra1", "osl1"):
        drawn = [f for f in figures(study) if any(t.get("name") == dc for t in traces(f, "bar"))]
        assert len(drawn) == 2, dc
    # the job's Gantt has a row for its home (fra1, the run-now bar) and one for osl1
    assert colours_by_datacenter(job, {"osl1"}) == {"osl1": seen["osl1"]}


def test_overlapping_predictions_are_told_apart_with_a_legend_entry_each() -> None:
    same = [ScatterPoint(f"trial #{i}", 0.8, 0.82, 0.05, {"trial": str(i)}) for i in (1, 2, 3)]
    fig = scatter("p", same, "predicted", "actual", bounds=(0, 1)).to_dict()
    points = [t for t in traces(fig, "scatter") if t.get("meta") == "trial"]
    assert [t["name"] for t in points] == ["trial #1", "trial #2", "trial #3"]
    assert all(t.get("showlegend", True) for t in points)  # one legend entry each
    markers = [t["marker"] for t in points]
    assert len({m["color"] for m in markers}) == len({m["symbol"] for m in markers}) == 3
    assert sorted((m["size"] for m in markers), reverse=True) == [m["size"] for m in markers]
    assert len({m["size"] for m in markers}) == 3  # each drawn on top of the larger before it
    assert all(m["opacity"] < 1 for m in markers)  # see-through: the one under it shows
    assert [(t["x"], t["y"]) for t in points] == [([0.8], [0.82])] * 3  # the data, not moved


def test_sixty_one_hours_read_as_a_time_axis_with_days() -> None:
    bars = [
        HourBar(NOW + i * H, 0.001 * (1 + i % 5), dc, f"trial #{n} at {dc}")
        for i in range(61)
        for n, dc in ((1, "fra1"), (2, "osl1"))
        if dc == "fra1" or i < 20
    ]
    fig = hourly_bars("e", bars, "kWh", "facility energy").to_dict()
    axis = fig["layout"]["xaxis"]
    assert axis["type"] == "date" and axis["title"]["text"] == "time (UTC)"
    assert axis["dtick"] == 6 * 3600 * 1000 and "%b %d" in axis["tickformat"]  # a day label
    assert fig["layout"]["yaxis"]["title"]["text"] == "facility energy (Wh)"
    columns = {t["name"]: t for t in traces(fig, "bar")}
    assert list(columns) == ["fra1", "osl1"]  # one legend entry per datacenter
    assert [len(t["x"]) for t in columns.values()] == [61, 20]
    assert columns["fra1"]["x"][0] == (NOW + H / 2).strftime("%Y-%m-%d %H:%M:%S")  # mid-hour
    colors = datacenter_colors(["fra1", "osl1"])
    assert {n: t["marker"]["color"] for n, t in columns.items()} == colors
    assert stored(fig) == pytest.approx(
        [b.value for b in bars if b.datacenter == "fra1"]
        + [b.value for b in bars if b.datacenter == "osl1"]
    )
    short = hourly_bars("e", bars[:3], "kWh", "facility energy").to_dict()
    assert short["layout"]["xaxis"]["dtick"] == 3600 * 1000  # 2 hours: a tick each


def test_a_page_s_datacenters_each_get_their_own_colour() -> None:
    colors = datacenter_colors(["osl1", "fra1", "sjc1", "fra1"])
    assert colors == {"fra1": PALETTE[0], "osl1": PALETTE[1], "sjc1": PALETTE[2]}
    assert datacenter_colors(["sjc1", "osl1", "fra1"]) == colors  # not by order of appearance


async def test_no_time_is_shown_with_fractions_of_a_second(db) -> None:
    s = await record_dashboard(db)
    odd = NOW + 3 * H + timedelta(seconds=17, microseconds=123456)
    spec = SPEC.model_copy(update={"webhook_url": None, "name": "intents-en"})
    moved = c.Assignment(
        occurred_at=odd,
        job_id=s.job,
        study_id=s.study,
        datacenter="osl1",
        action=c.AssignmentAction.pause,
        plan_version=3,
        spec=spec,
        config=CONFIG,
        gpus=2,
        hours_planned=1,
    )
    await EventWriter(db).write(
        [Incoming("METATUNE", 1000, subjects.assignments("osl1"), moved.to_bytes())]
    )
    with TestClient(create_app(db, Settings())) as web:
        pages = [
            web.get(path).text
            for path in ("/", f"/studies/{s.study}", f"/jobs/{s.job}", "/datacenters/fra1")
        ]
    assert "pause at osl1" in pages[2]  # the odd time is on the job's chart
    for page in pages:
        assert not re.search(r"\d:\d\d\.\d|T\d\d:\d\d", page), re.findall(
            r".{30}\d:\d\d\.\d+", page
        )
