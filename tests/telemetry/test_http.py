"""The HTTP API and pages answer from the real database (Starlette's test client, no socket)."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from uuid import uuid4

import pytest
from starlette.testclient import TestClient

from metatune.settings import Settings
from metatune_telemetry.api.adapters.http import create_app
from tests.support.samples import NOW
from tests.support.storage import BACKEND

from .figures import stored, titled, traces
from .scenario import ACTUAL_KG, BASELINE_KG, CLASSES, DE, PLANNED_KG, H, record_dashboard


async def test_api_report_totals_and_health(db) -> None:
    app = create_app(db, Settings())
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"database": "ok", "mode": BACKEND}
        report = client.get(f"/api/studies/{uuid4()}/report").json()
        assert (
            report["runs"] == [] and report["kgco2eq"] is None and report["pricing"] == "unpriced"
        )
        assert client.get("/api/totals").json()["runs_completed"] == 0
        assert client.get("/api/studies").json() == []
        assert "No study yet" in client.get("/").text  # the index answers before any study
        # the charts' plotly.js comes from the dashboard itself (offline), never from a CDN
        script = client.get("/static/plotly.min.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith(
            "text/javascript"
        )
        assert "plotly.js v" in script.text[:2000]
        assert '<script src="/static/plotly.min.js">' in client.get("/").text
        assert client.get("/api/studies/nope/report").status_code == 400
        assert client.get(f"/api/jobs/{uuid4()}/timeline").status_code == 404
        assert client.get("/jobs/nope").status_code == 400
        assert client.get("/datacenters/nowhere").status_code == 404


async def test_job_timeline_against_the_run_now_baseline(db) -> None:
    s = await record_dashboard(db)
    with TestClient(create_app(db, Settings())) as client:
        t = client.get(f"/api/jobs/{s.job}/timeline").json()
        page = client.get(f"/jobs/{s.job}").text
    assert [
        (r["datacenter"], datetime.fromisoformat(r["start"]), r["hours"]) for r in t["ran"]
    ] == [("osl1", NOW + 2 * H, 2)]
    assert t["ran"][0]["kgco2eq"] == pytest.approx(ACTUAL_KG)
    assert t["ran"][0]["facility_energy_kwh"] == pytest.approx(1.4 * 1.1)
    assert [(p["datacenter"], p["hours"]) for p in t["planned"]] == [("osl1", 2)] and t[
        "plan_version"
    ] == 3
    assert t["planned_kgco2eq"] == pytest.approx(PLANNED_KG)
    assert t["baseline"]["datacenter"] == "fra1" and len(t["baseline"]["hours"]) == 2
    assert (
        t["baseline"]["kgco2eq"] == pytest.approx(BASELINE_KG) and t["baseline"]["missing"] is None
    )
    assert [(m["datacenter"], m["action"]) for m in t["assignments"]] == [("osl1", "start")]
    timeline = titled(page, "where and when it ran")
    assert timeline["layout"]["title"]["text"].startswith("intents-en, trial #")  # its study's name
    bars = {t["name"]: t for t in traces(timeline, "bar")}
    assert bars["ran"]["y"] == ["osl1"] and bars["ran"]["customdata"][0]["hours"] == "2"
    assert bars["ran"]["customdata"][0]["kwh"] == "1.54"
    assert bars["planned (latest plan)"]["y"] == ["osl1"]
    assert [m["y"] for m in traces(timeline, "scatter")] == [["osl1"]]  # the assignment
    # the comparison bars: baseline, plan, actual
    compared = titled(page, "against the run-now baseline")
    assert stored(compared) == pytest.approx([BASELINE_KG, PLANNED_KG, ACTUAL_KG], rel=1e-5)


async def test_datacenter_forecast_curves_with_intervals(db) -> None:
    await record_dashboard(db)
    with TestClient(create_app(db, Settings())) as client:
        f = client.get("/api/datacenters/fra1/forecast").json()
        page = client.get("/datacenters/fra1").text
    assert f["region"] == "DE" and len(f["curves"]) == 1
    curve = f["curves"][0]
    assert curve["g_per_kwh"] == DE and len(curve["hours"]) == 168
    assert all(
        lo < mid < hi
        for lo, mid, hi in zip(curve["p10_g_per_kwh"], DE, curve["p90_g_per_kwh"], strict=True)
    )
    lines = {t["meta"]: t for t in traces(titled(page, "carbon intensity forecasts"), "scatter")}
    assert lines["median"]["y"] == DE
    assert (min(lines["low"]["y"]), max(lines["high"]["y"])) == (290, 477)
    assert lines["high"]["fill"] == "tonexty"  # the p10-p90 band is shaded


async def test_the_report_puts_each_accuracy_beside_its_majority_and_chance_baselines(db) -> None:
    s = await record_dashboard(db)
    with TestClient(create_app(db, Settings())) as client:
        report = client.get(f"/api/studies/{s.study}/report").json()
        markdown = client.get(f"/api/studies/{s.study}/report?format=md").text
        table = client.get(f"/api/studies/{s.study}/report?format=csv").text
    baselines = ("accuracy", "majority_baseline", "chance_baseline")
    first, second = report["runs"]  # trial #1 reached an accuracy; #2 was compared by loss only
    assert [first[k] for k in baselines] == [0.8, 0.85, 1 / CLASSES]
    assert second["accuracy"] is None
    assert "| Accuracy (held-out) | 0.800 (below majority 0.850, chance 0.250) |" in markdown
    assert markdown.count("Accuracy (held-out)") == 1
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [[row[k] for k in baselines] for row in rows] == [
        ["0.8", "0.85", "0.25"],
        ["", "", "0.25"],
    ]


async def test_study_trials_predicted_against_actual(db) -> None:
    s = await record_dashboard(db)
    with TestClient(create_app(db, Settings())) as client:
        trials = client.get(f"/api/studies/{s.study}/trials").json()
        page = client.get(f"/studies/{s.study}").text
    assert [(t["trial_index"], t["metric_name"], t["predicted"], t["actual"]) for t in trials] == [
        (0, "accuracy", 0.85, 0.8),
        (1, "val_loss", 0.4, 0.45),
    ]
    # an early stop reads as one on the API and the page, with why and where it stopped
    assert [t["status"] for t in trials] == ["completed", "early-stopped (plateau, step 10)"]
    assert "early-stopped (plateau, step 10)" in page and "completed" in page
    assert trials[0]["majority_baseline"] == 0.85 and trials[0]["chance_baseline"] == 1 / CLASSES
    assert "0.8000 (below majority 0.8500, chance 0.2500)" in page
    assert f"<h1>Study intents-en ({s.study})</h1>" in page  # its name, not a bare id
    with TestClient(create_app(db, Settings())) as client:
        listed = client.get("/api/studies").json()
        index = client.get("/").text
    assert [
        (x["study_id"], x["name"], x["trials_requested"], x["trials_finished"]) for x in listed
    ] == [(str(s.study), "intents-en", 2, 2)]
    assert listed[0]["best_accuracy"] == 0.8
    assert (listed[0]["majority_baseline"], listed[0]["chance_baseline"]) == (0.85, 1 / CLASSES)
    assert "0.8000 (below majority 0.8500, chance 0.2500)" in index
    assert f'<a href="/studies/{s.study}">intents-en</a>' in index
    points = [
        tuple(d.values())
        for metric in ("accuracy", "val_loss")
        for t in traces(titled(page, f"intents-en: predicted vs actual {metric}"), "scatter")
        if t.get("meta") == "trial"
        for d in t["customdata"]
    ]
    assert points == [("0", "accuracy", "0.85", "0.8"), ("1", "val_loss", "0.4", "0.45")]
    accuracy = titled(page, "predicted vs actual accuracy")
    assert accuracy["layout"]["yaxis"]["range"] == [0, 1]
    assert [t["y"] for t in accuracy["data"] if t.get("meta") == "baseline"] == [[0.85, 0.85]]
    assert f'href="/jobs/{s.job}"' in page
