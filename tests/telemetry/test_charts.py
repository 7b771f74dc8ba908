"""The dashboard's charts read as a person expects: figures in a unit that shows them and never in
scientific notation, every axis titled with its unit, one row per bar label, axes within the
metric's range with its majority-class and chance baselines marked."""

from __future__ import annotations

from datetime import timedelta

import pytest

from metatune_telemetry.api.domain.charts import (
    GanttBar,
    GanttMark,
    ScatterPoint,
    bar_chart,
    embed,
    gantt,
    plain,
    scatter,
)
from tests.support.samples import NOW

from .figures import figures, stored, traces


def test_small_energies_are_shown_in_a_unit_with_digits_not_in_scientific_notation() -> None:
    fig = bar_chart(
        "Facility energy per run-hour", [("#1 10:00", 1.916e-05, "fra1")], "kWh", "facility energy"
    )
    drawn = figures(embed(fig))[0]  # what the page embeds
    (bar,) = traces(drawn, "bar")
    assert bar["x"] == pytest.approx([19.16]) and bar["y"] == ["#1 10:00"]
    assert drawn["layout"]["xaxis"]["title"]["text"] == "facility energy (mWh)"
    assert stored(drawn) == [1.916e-05]  # the data keep the stored unit
    axis = drawn["layout"]["xaxis"]
    assert (axis["tickformat"], axis["hoverformat"], axis["exponentformat"]) == (
        ",.3~r",
        ",.3~r",
        "none",
    )
    assert "mWh" in bar["hovertemplate"] and "e" not in axis["tickformat"]
    assert (plain(1234.5), plain(0.5), plain(0.0)) == ("1,234", "0.500", "0")


def test_each_bar_label_has_its_own_row() -> None:
    labels = [f"trial #{i} 11-27 10:00 fra1" for i in range(8)]
    fig = bar_chart("e", [(label, 1.0, None) for label in labels], "Wh", "energy").to_dict()
    assert fig["layout"]["yaxis"]["categoryarray"] == labels
    assert fig["layout"]["height"] >= 8 * 26  # a row per label: the labels cannot overlap
    assert [t["orientation"] for t in traces(fig, "bar")] == ["h"]


def test_a_scatter_of_accuracy_spans_zero_to_one_with_its_baselines() -> None:
    point = ScatterPoint("trial #4", 0.95, 0.9, 0.3, {"trial": "4"}, baseline=0.85, chance=0.25)
    fig = scatter(
        "Predicted vs actual accuracy", [point], "predicted", "actual", bounds=(0, 1)
    ).to_dict()
    assert fig["layout"]["xaxis"]["range"] == fig["layout"]["yaxis"]["range"] == [0, 1]
    (trial,) = [t for t in traces(fig, "scatter") if t.get("meta") == "trial"]
    assert trial["name"] == "trial #4" and trial.get("showlegend", True)
    assert trial["customdata"] == [{"trial": "4"}]
    # the whisker is cut at 1: +0.05 to the right, the whole 0.3 to the left
    assert trial["error_x"]["array"] == pytest.approx([0.05])
    assert trial["error_x"]["arrayminus"] == pytest.approx([0.3])
    (baseline,) = [t for t in traces(fig, "scatter") if t.get("meta") == "baseline"]
    assert baseline["y"] == [0.85, 0.85] and baseline["x"] == [0, 1]
    # chance (1 / classes): a second dotted line across the accuracy axis
    (chance,) = [t for t in traces(fig, "scatter") if t.get("meta") == "chance"]
    assert chance["y"] == [0.25, 0.25] and chance["x"] == [0, 1]
    assert chance["line"]["dash"] == baseline["line"]["dash"] == "dot"
    assert chance["name"] == "chance 0.250" and chance["line"]["color"] != baseline["line"]["color"]


def test_an_unbounded_scatter_pads_its_data() -> None:
    point = ScatterPoint("trial #1", 0.4, 0.45, None)
    fig = scatter("loss", [point], "predicted", "actual", bounds=(0.0, float("inf"))).to_dict()
    low, high = fig["layout"]["xaxis"]["range"]
    assert 0 <= low < 0.4 and 0.45 < high < 1


def test_gantt_rows_are_datacenters_and_bars_span_their_hours() -> None:
    ran = GanttBar("osl1", NOW, NOW + timedelta(hours=2), "ran", "ran at osl1", {"hours": "2"})
    home = GanttBar("fra1", NOW, NOW + timedelta(hours=1), "baseline", "run now", {"hours": "1"})
    fig = gantt("g", [ran, home], [GanttMark("osl1", NOW, "start")]).to_dict()
    assert fig["layout"]["yaxis"]["categoryarray"] == ["fra1", "osl1"]
    assert fig["layout"]["xaxis"]["title"]["text"] == "time (UTC)"
    bars = {t["name"]: t for t in traces(fig, "bar")}
    assert bars["ran"]["x"] == [2 * 3600 * 1000] and bars["ran"]["customdata"] == [{"hours": "2"}]
    assert bars["ran"]["base"] == [NOW.strftime("%Y-%m-%d %H:%M:%S")]
    assert bars["run now at home (baseline)"]["y"] == ["fra1"]
    (mark,) = traces(fig, "scatter")
    assert mark["y"] == ["osl1"] and mark["hovertext"] == ["start"]
