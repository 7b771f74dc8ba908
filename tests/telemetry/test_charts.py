"""The dashboard's charts read as a person expects: figures in a unit that shows them, no label
drawn over another, axes within the metric's range."""

from __future__ import annotations

import re

from metatune_telemetry.domain.charts import ScatterPoint, bar_chart, plain, scatter


def test_small_energies_are_shown_in_a_unit_with_digits_not_in_scientific_notation() -> None:
    svg = bar_chart("Facility energy per run-hour", [("#1 10:00", 1.916e-05, "fra1")], "kWh")
    assert "(mWh, max 19.2)" in svg and "<title>#1 10:00: 19.2 mWh</title>" in svg
    shown = re.sub(r' data-[a-z]+="[^"]*"', "", svg)  # what a person reads, not the data
    assert "e-05" not in shown
    assert 'data-value="1.916e-05"' in svg  # the data keep the stored unit
    assert (plain(1234.5), plain(0.5), plain(0.0)) == ("1,234", "0.500", "0")


def test_bar_labels_are_drawn_only_where_they_fit() -> None:
    few = bar_chart("e", [("#1", 1.0, None), ("#2", 2.0, None)], "Wh")
    assert len(re.findall(r"<text [^>]*>#\d", few)) == 2
    crowded = bar_chart("e", [(f"trial #{i} 11-27 10:00 fra1", 1.0, None) for i in range(8)], "Wh")
    assert not re.findall(r"<text [^>]*>trial", crowded)  # too narrow: the tooltips carry them
    assert crowded.count("<title>trial #") == 8


def test_a_scatter_of_accuracy_never_runs_past_one() -> None:
    point = ScatterPoint("trial #4", 0.95, 0.9, 0.3, {})
    svg = scatter("Predicted vs actual accuracy", [point], "predicted", "actual", bounds=(0, 1))
    low, high = map(float, re.search(r"predicted \(([\d.]+) to ([\d.]+)\)", svg).groups())
    assert low >= 0 and high <= 1
