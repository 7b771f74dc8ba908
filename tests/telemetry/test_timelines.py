"""A study's timeline against run-now, as figures (pure): a row per trial named as everywhere
(#1, #2...), the hours it ran coloured and labelled by datacenter (a migrated trial has a bar at
each, in one lane), beside the hours it would have taken run now at home, with the gCO2eq of both
in the tooltips and a companion bar chart."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest

from metatune_telemetry.api.domain.charts import PALETTE, RUN_NOW_COLOR, timeline
from metatune_telemetry.api.domain.timelines import study_timeline, trial_emissions
from metatune_telemetry.api.domain.views import Baseline, JobTimeline, Stretch
from tests.support.samples import NOW

from .figures import stored, traces

H = timedelta(hours=1)
NO_FORECAST = "1 of 1 hour(s) without a forecast, first 2026-03-01 12:00"


def trial(index: int, ran: list[Stretch], baseline: Baseline) -> JobTimeline:
    return JobTimeline(
        job_id=uuid4(),
        study_id=None,
        trial_index=index,
        status="completed",
        home_datacenter="fra1",
        ran=ran,
        plan_version=None,
        planned=[],
        planned_kgco2eq=None,
        assignments=[],
        baseline=baseline,
    )


# #1 was shifted two hours to osl1, then migrated home to fra1 for its last hour; run now it would
# have taken NOW..NOW+3h at fra1 for 900 g. #2 ran at once at home, its hour unpriced and no
# forecast covering its run-now hour. #3 is requested, not run yet.
TRIALS = [
    trial(
        0,
        [
            Stretch(datacenter="osl1", start=NOW + 2 * H, hours=2, kgco2eq=0.02),
            Stretch(datacenter="fra1", start=NOW + 4 * H, hours=1, kgco2eq=0.3),
        ],
        Baseline(datacenter="fra1", hours=[NOW + i * H for i in range(3)], kgco2eq=0.9),
    ),
    trial(
        1,
        [Stretch(datacenter="fra1", start=NOW, hours=1)],
        Baseline(datacenter="fra1", hours=[NOW], kgco2eq=None, missing=NO_FORECAST),
    ),
    trial(2, [], Baseline(datacenter="fra1", hours=[NOW + H], kgco2eq=0.25)),
]


def ms(hours: int) -> float:
    return hours * 3600 * 1000.0


def utc(at) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


def test_each_trial_is_a_row_its_runs_coloured_by_datacenter_beside_run_now() -> None:
    fig = study_timeline("intents-en", list(reversed(TRIALS))).to_dict()
    layout = fig["layout"]
    assert layout["title"]["text"] == (
        "intents-en: where and when each trial ran, against running it now at home"
    )
    assert (layout["xaxis"]["title"]["text"], layout["yaxis"]["title"]["text"]) == (
        "time (UTC)",
        "trial",
    )
    assert layout["yaxis"]["categoryarray"] == ["#1", "#2", "#3"]  # in trial order, whatever came
    bars = {t["name"]: t for t in traces(fig, "bar")}
    assert list(bars) == ["ran at fra1", "ran at osl1", "run now at home"]
    fra1, osl1, now = bars.values()
    # the migrated trial: a bar at osl1 and one at fra1, in its row's one "ran" lane
    assert (osl1["y"], osl1["base"], osl1["x"], osl1["text"]) == (
        ["#1"],
        [utc(NOW + 2 * H)],
        [ms(2)],
        ["osl1"],
    )
    assert (fra1["y"], fra1["base"], fra1["x"], fra1["text"]) == (
        ["#1", "#2"],
        [utc(NOW + 4 * H), utc(NOW)],
        [ms(1), ms(1)],
        ["fra1", "fra1"],
    )
    assert fra1["offsetgroup"] == osl1["offsetgroup"] != now["offsetgroup"]
    assert fra1["marker"]["color"] != osl1["marker"]["color"]
    assert {fra1["marker"]["color"], osl1["marker"]["color"]} <= set(PALETTE)
    # run now: every trial requested, at home from its request, grey and dotted
    assert (now["y"], now["base"], now["x"]) == (
        ["#1", "#2", "#3"],
        [utc(NOW), utc(NOW), utc(NOW + H)],
        [ms(3), ms(1), ms(1)],
    )
    assert now["marker"]["color"] == RUN_NOW_COLOR and now["marker"]["pattern"]["shape"] == "."
    assert [d["gco2eq"] for d in now["customdata"]] == ["900", "unknown", "250"]
    # the tooltips put the trial's grams as run beside run now
    assert osl1["hovertext"] == [
        "#1 ran at osl1, 03-01 14:00 to 03-01 16:00 UTC (2 h): 20.0 gCO2eq"
        "<br>the trial: 320 gCO2eq as run, 900 gCO2eq run now at fra1"
    ]
    assert now["hovertext"][0] == (
        "#1 run now at fra1, 03-01 12:00 to 03-01 15:00 UTC (3 h): 900 gCO2eq"
        "<br>as run at osl1, fra1: 320 gCO2eq"
    )
    assert now["hovertext"][1].endswith(f"unknown ({NO_FORECAST})<br>as run at fra1: unpriced")
    assert now["hovertext"][2].endswith("250 gCO2eq<br>as run: not run yet")


def test_a_label_that_does_not_fit_its_bar_is_hidden_not_overlapped() -> None:
    fig = study_timeline("s", TRIALS).to_dict()
    assert fig["layout"]["uniformtext"] == {"minsize": 10, "mode": "hide"}
    assert {t["textposition"] for t in traces(fig, "bar")} == {"inside"}


def test_the_companion_bars_compare_grams_as_run_with_run_now() -> None:
    fig = trial_emissions("intents-en", TRIALS).to_dict()
    # #2's run is unpriced and its run-now unknown: no bar for either; #3 has not run
    assert fig["layout"]["yaxis"]["categoryarray"] == [
        "#1 as run at osl1, fra1",
        "#1 run now at fra1",
    ]
    assert stored(fig) == pytest.approx([0.32, 0.9])
    assert fig["layout"]["xaxis"]["title"]["text"] == "emissions (gCO2eq)"
    as_run, now = traces(fig, "bar")
    assert (as_run["name"], now["name"]) == ("as run", "run now at home")
    assert now["marker"]["color"] == RUN_NOW_COLOR != as_run["marker"]["color"]


def test_a_study_with_nothing_to_draw_says_so() -> None:
    assert timeline("s: where", []).to_dict()["layout"]["title"]["text"] == "s: where: no data"
