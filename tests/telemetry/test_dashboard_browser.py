"""The dashboard in headless Chromium (Debian ``chromium``; CI installs it in scripts/install)
against a real database, served by uvicorn: plotly draws every chart from the dashboard's own
plotly.js (no network), each with titled axes, no label over another, the recorded data.

Behind the dashboard's token, a browser opens a page once with ``?token=`` and then rides on the
cookie that sets (index, study page and the page's own plotly.js alike).

``METATUNE_SCREENSHOTS=DIR`` also writes each page's screenshot into DIR (the README's are in
docs/dashboard/, made so)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import uvicorn

from metatune.clock import RealClock
from metatune.dashboard_tokens import TOKEN_FILE, write_tokens
from metatune.settings import Settings
from metatune_telemetry.api.adapters.http import create_app
from tests.support.servers import free_port
from tests.support.waiting import wait_for

from .browser import Look, chromium, overlapping
from .figures import figures, stored, titled, traces
from .recording import record_two_trials
from .scenario import ACTUAL_KG, BASELINE_KG, CLASSES, DE, PLANNED_KG, record_dashboard

CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary (apt-get install chromium)"
)

pytestmark = pytest.mark.slow  # drives headless Chromium


@asynccontextmanager
async def serving(db, settings: Settings | None = None) -> AsyncIterator[str]:
    """The dashboard on a free port; yields its base URL once uvicorn listens."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(db, settings or Settings()),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: server.started or task.done(), "uvicorn listening")
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def look(base: str, pages: dict[str, str], keep: bool = False) -> dict[str, Look]:
    """Each page (name: path) as Chromium drew it; with ``keep``, its screenshot is saved as
    NAME.png where METATUNE_SCREENSHOTS says."""
    assert CHROMIUM is not None
    seen = {}
    with chromium(CHROMIUM) as browser:  # leaving kills it, which also ends a hung look
        for name, path in pages.items():
            seen[name] = await asyncio.wait_for(asyncio.to_thread(browser.look, base + path), 120)
    if keep and (into := os.environ.get("METATUNE_SCREENSHOTS")):
        Path(into).mkdir(parents=True, exist_ok=True)
        for name, page in seen.items():
            (Path(into) / f"{name}.png").write_bytes(page.png)
    return seen


def title(figure) -> str:
    return figure["layout"]["title"]["text"]


def labels(page: Look, words: str) -> set[str]:
    """The texts drawn in the one chart of ``page`` whose title holds ``words``."""
    (chart,) = [c for c in page.charts if words in (c["title"] or "")]
    return {b["text"] for b in chart["boxes"]}


def axes(page: Look) -> list[tuple[str | None, str | None, str | None]]:
    return [(c["title"], c["x"], c["y"]) for c in page.charts]


@needs_chromium
async def test_study_page_charts_show_data(db) -> None:
    await record_two_trials(db)
    study = (await db.fetch("SELECT study_id FROM studies"))[0][0]
    async with serving(db) as base:
        page = (await look(base, {"study": f"/studies/{study}"}))["study"]
    # the per-run-hour charts (the timeline and its companion are checked on the scenario below)
    values = [v for f in figures(page.html) if "per run-hour" in title(f) for v in stored(f)]
    # energy: two priced hours and one unpriced (0.6, 0.3, 0.12 kWh); emissions: the two priced hours
    assert sorted(values) == pytest.approx(sorted([0.6, 0.3, 0.12, 0.18, 0.03]))
    assert "unpriced" in page.html
    assert all(c["boxes"] for c in page.charts), [c["title"] for c in page.charts]
    assert [c["title"].split(": ", 1)[1] for c in page.charts] == [
        "where and when each trial ran, against running it now at home",
        "emissions of each trial as run and run now at home",
        "facility energy per run-hour",
        "emissions per run-hour (priced hours)",
        "predicted vs actual: no data",
    ]


@needs_chromium
async def test_every_page_is_drawn_with_titled_axes_and_no_overlapping_labels(db) -> None:
    s = await record_dashboard(db)
    async with serving(db) as base:
        seen = await look(
            base,
            {
                "index": "/",
                "study": f"/studies/{s.study}",
                "job": f"/jobs/{s.job}",
                "datacenter": "/datacenters/fra1",
            },
            keep=True,
        )
    assert seen["index"].charts == [] and "intents-en" in seen["index"].html
    trial = "intents-en, trial #1"
    assert axes(seen["job"]) == [
        (
            f"{trial}: where and when it ran, was planned, would have run now",
            "time (UTC)",
            "datacenter",
        ),
        (f"{trial}: emissions against the run-now baseline", "emissions (gCO2eq)", None),
    ]
    assert axes(seen["study"]) == [
        (
            "intents-en: where and when each trial ran, against running it now at home",
            "time (UTC)",
            "trial",
        ),
        (
            "intents-en: emissions of each trial as run and run now at home",
            "emissions (gCO2eq)",
            None,
        ),
        ("intents-en: facility energy per run-hour", "time (UTC)", "facility energy (Wh)"),
        ("intents-en: emissions per run-hour (priced hours)", "time (UTC)", "emissions (gCO2eq)"),
        (
            "intents-en: predicted vs actual accuracy per trial (whiskers: ±1 sd)",
            "predicted accuracy",
            "actual accuracy",
        ),
        (
            "intents-en: predicted vs actual val_loss per trial (whiskers: ±1 sd)",
            "predicted val_loss",
            "actual val_loss",
        ),
    ]
    assert axes(seen["datacenter"]) == [
        ("fra1: carbon intensity forecasts for DE, median and p10-p90", "time (UTC)", "gCO2eq/kWh")
    ]
    for name, page in seen.items():
        for chart in page.charts:
            assert len(chart["boxes"]) > 3, (name, chart["title"])  # ticks drawn
            assert overlapping(chart["boxes"]) == [], (name, chart["title"])
    # the numbers drawn are the recorded ones
    job, study = seen["job"].html, seen["study"].html
    assert stored(titled(job, "against the run-now baseline")) == pytest.approx(
        [BASELINE_KG, PLANNED_KG, ACTUAL_KG], rel=1e-5
    )
    gantt = {t["name"]: t for t in traces(titled(job, "where and when it ran"), "bar")}
    assert [(name, t["y"], [d["hours"] for d in t["customdata"]]) for name, t in gantt.items()] == [
        ("ran", ["osl1"], ["2"]),
        ("planned (latest plan)", ["osl1"], ["2"]),
        ("run now at home (baseline)", ["fra1"], ["2"]),
    ]
    # the study's timeline: a row per trial, its run by datacenter beside its run-now hours, the
    # grams of both in the tooltips and the companion bars
    timeline = traces(titled(study, "where and when each trial ran"), "bar")
    assert [
        (t["name"], t["y"], t["text"], [d["hours"] for d in t["customdata"]]) for t in timeline
    ] == [
        ("ran at osl1", ["#1"], ["osl1"], ["2"]),
        # #2 metered no hour (its completion reported none): no run-now basis, no row
        ("run now at home", ["#1"], ["fra1"], ["2"]),
    ]
    ran, run_now = (t["customdata"][0]["gco2eq"] for t in timeline)
    assert [float(ran), float(run_now)] == pytest.approx([ACTUAL_KG * 1000, BASELINE_KG * 1000])
    assert stored(titled(study, "as run and run now")) == pytest.approx(
        [ACTUAL_KG, BASELINE_KG], rel=1e-5
    )
    texts = labels(seen["study"], "where and when each trial ran")
    assert {"#1", "ran at osl1", "run now at home", "osl1", "fra1"} <= texts  # bars labelled
    # the accuracy axis: the majority-class and chance baselines, each a dotted line in the legend
    accuracy = titled(study, "predicted vs actual accuracy")
    assert {
        t["meta"]: t["y"] for t in traces(accuracy, "scatter") if t.get("meta", "trial") != "trial"
    } == {
        "baseline": [0.85, 0.85],
        "chance": [1 / CLASSES, 1 / CLASSES],
    }
    legend = labels(seen["study"], "predicted vs actual accuracy")
    assert {"majority baseline 0.850", "chance 0.250", "trial #1"} <= legend  # an entry a trial
    forecast = {
        t["meta"]: t["y"] for t in traces(titled(seen["datacenter"].html, "forecasts"), "scatter")
    }
    assert forecast["median"] == DE
    points = [
        (d["trial"], d["predicted"], d["actual"])
        for f in figures(study)
        if "predicted vs actual" in f["layout"]["title"]["text"]
        for t in traces(f, "scatter")
        if t.get("meta") == "trial"
        for d in t["customdata"]
    ]
    assert points == [("0", "0.85", "0.8"), ("1", "0.4", "0.45")]


@needs_chromium
async def test_the_index_behind_a_token_given_once_in_the_query_then_by_cookie(
    db, tmp_path: Path
) -> None:
    s = await record_dashboard(db)
    write_tokens(tmp_path / "secrets", RealClock().now())
    token = (tmp_path / "secrets" / TOKEN_FILE).read_text().strip()
    async with serving(db, Settings(dashboard_tokens_dir=tmp_path / "secrets")) as base:
        refused = (await look(base, {"index": "/"}))["index"]  # a browser without the token
        # one browser: the token in the first address only, the cookie it set for the next page
        seen = await look(base, {"index": f"/?token={token}", "study": f"/studies/{s.study}"})
    assert "a dashboard token is required" in refused.html and "intents-en" not in refused.html
    index = seen["index"]
    assert index.charts == [] and f'<a href="/studies/{s.study}">intents-en</a>' in index.html
    assert "1 / 2" not in index.html and "2 / 2" in index.html  # both trials ended
    assert token not in index.html
    study = seen["study"]  # drawn: its plotly.js came through the cookie too
    assert len(study.charts) == 6 and all(len(c["boxes"]) > 3 for c in study.charts)
